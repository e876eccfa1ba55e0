// Mastra travel scenario: a Mastra `Agent` with the three tools (`createTool`) and memory
// (`Memory` on the in-memory store, the conversation as its thread), run once per turn
// with `agent.generate(query, { memory: { thread, resource } })`. The model is scripted
// with the AI SDK's own `MockLanguageModelV3` (ai/test). Tracing is Mastra's own:
// `Observability` with an `OtelExporter` whose custom provider sends OTLP/HTTP (JSON) to
// the receiver generate.py runs (OTEL_EXPORTER_OTLP_TRACES_ENDPOINT).
//
//   node scenario.mjs mastra_otel

import { Agent } from '@mastra/core/agent';
import { Mastra } from '@mastra/core/mastra';
import { InMemoryStore } from '@mastra/core/storage';
import { createTool } from '@mastra/core/tools';
import { Memory } from '@mastra/memory';
import { Observability } from '@mastra/observability';
import { OtelExporter } from '@mastra/otel-exporter';
import { MockLanguageModelV3 } from 'ai/test';
import { z } from 'zod';

import {
  DESCRIPTIONS,
  TOOLS,
  loadScenario,
  reportAnswers,
  scriptedGenerate,
} from '../node_shared/travel.mjs';

const variant = process.argv[2];
if (variant !== 'mastra_otel') throw new Error(`unknown scenario ${variant}`);
const scenario = loadScenario();
const endpoint = process.env.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT;
if (!endpoint) throw new Error('OTEL_EXPORTER_OTLP_TRACES_ENDPOINT is not set');

const scriptedResponse = scriptedGenerate(scenario);

// Mastra's agent loop streams from the model; the mock answers both entry points with the
// same scripted step (doStream as the stream parts of that step).
function streamOf(response) {
  const parts = [{ type: 'stream-start', warnings: [] }];
  for (const item of response.content) {
    if (item.type === 'text') {
      parts.push({ type: 'text-start', id: 't0' });
      parts.push({ type: 'text-delta', id: 't0', delta: item.text });
      parts.push({ type: 'text-end', id: 't0' });
    } else {
      parts.push(item);
    }
  }
  parts.push({ type: 'finish', finishReason: response.finishReason, usage: response.usage });
  return new ReadableStream({
    start(controller) {
      for (const part of parts) controller.enqueue(part);
      controller.close();
    },
  });
}

const model = new MockLanguageModelV3({
  provider: 'scripted',
  modelId: 'scripted-travel-model',
  doGenerate: scriptedResponse,
  doStream: async () => ({ stream: streamOf(await scriptedResponse()) }),
});

const tools = {
  get_weather: createTool({
    id: 'get_weather',
    description: DESCRIPTIONS.get_weather,
    inputSchema: z.object({ city: z.string() }),
    execute: async (input) => TOOLS.get_weather(input),
  }),
  search_flights: createTool({
    id: 'search_flights',
    description: DESCRIPTIONS.search_flights,
    inputSchema: z.object({
      origin: z.string(),
      destination: z.string(),
      filters: z.object({ max_price: z.number(), cabin: z.string() }).partial(),
    }),
    execute: async (input) => TOOLS.search_flights(input),
  }),
  book_flight: createTool({
    id: 'book_flight',
    description: DESCRIPTIONS.book_flight,
    inputSchema: z.object({ flight_id: z.string() }),
    execute: async (input) => TOOLS.book_flight(input),
  }),
};

const agent = new Agent({
  id: 'travel-agent',
  name: scenario.agent_name,
  instructions: scenario.system_prompt,
  model,
  tools,
  memory: new Memory({ options: { lastMessages: 20 } }),
});

const exporter = new OtelExporter({
  provider: { custom: { endpoint, protocol: 'http/json' } },
  resourceAttributes: { 'service.name': scenario.service_name },
  // Traces only: the receiver takes /v1/traces (Mastra's own log records are not the
  // agent's conversation).
  signals: { traces: true, logs: false },
});
const mastra = new Mastra({
  agents: { travelAgent: agent },
  storage: new InMemoryStore(),
  observability: new Observability({
    configs: {
      otel: { serviceName: scenario.service_name, exporters: [exporter] },
    },
  }),
});

const travelAgent = mastra.getAgent('travelAgent');
const answers = [];
for (const turn of scenario.turns) {
  const result = await travelAgent.generate(turn.query, {
    memory: { thread: scenario.conversation_id, resource: 'traveller-1' },
    maxSteps: 10,
  });
  answers.push(result.text);
}
await mastra.shutdown();
reportAnswers(answers);
