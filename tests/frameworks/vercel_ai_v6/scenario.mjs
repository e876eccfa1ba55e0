// Vercel AI SDK (previous major, ai@6) travel scenario: `generateText` with three tools and
// a multi-step tool loop, the model scripted with the SDK's own `MockLanguageModelV3`
// (ai/test), telemetry switched on per call with `experimental_telemetry` (the SDK's
// built-in `ai.*` spans) on the OpenTelemetry Node SDK, exported over OTLP/HTTP (JSON) to
// the receiver generate.py runs.
//
//   node scenario.mjs vercel_ai_v6_telemetry

import { OTLPTraceExporter } from '@opentelemetry/exporter-trace-otlp-http';
import { resourceFromAttributes } from '@opentelemetry/resources';
import { NodeTracerProvider } from '@opentelemetry/sdk-trace-node';
import { BatchSpanProcessor } from '@opentelemetry/sdk-trace-base';
import { generateText, stepCountIs, tool } from 'ai';
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
if (variant !== 'vercel_ai_v6_telemetry') throw new Error(`unknown scenario ${variant}`);
const scenario = loadScenario();

const provider = new NodeTracerProvider({
  resource: resourceFromAttributes({ 'service.name': scenario.service_name }),
  // Batched: one export per span (SimpleSpanProcessor) can exceed the exporter's limit of
  // concurrent requests, which drops spans.
  spanProcessors: [new BatchSpanProcessor(new OTLPTraceExporter())],
});
provider.register();

const model = new MockLanguageModelV3({
  provider: 'scripted',
  modelId: 'scripted-travel-model',
  doGenerate: scriptedGenerate(scenario),
});

const tools = {
  get_weather: tool({
    description: DESCRIPTIONS.get_weather,
    inputSchema: z.object({ city: z.string() }),
    execute: async (input) => TOOLS.get_weather(input),
  }),
  search_flights: tool({
    description: DESCRIPTIONS.search_flights,
    inputSchema: z.object({
      origin: z.string(),
      destination: z.string(),
      filters: z.object({ max_price: z.number(), cabin: z.string() }).partial(),
    }),
    execute: async (input) => TOOLS.search_flights(input),
  }),
  book_flight: tool({
    description: DESCRIPTIONS.book_flight,
    inputSchema: z.object({ flight_id: z.string() }),
    execute: async (input) => TOOLS.book_flight(input),
  }),
};

const history = [];
const answers = [];
for (const turn of scenario.turns) {
  history.push({ role: 'user', content: turn.query });
  const result = await generateText({
    model,
    system: scenario.system_prompt,
    messages: history,
    tools,
    stopWhen: stepCountIs(10),
    experimental_telemetry: {
      isEnabled: true,
      functionId: scenario.agent_name,
      // The SDK has no conversation id: applications pass one as metadata.
      metadata: { conversationId: scenario.conversation_id },
    },
  });
  history.push(...result.response.messages);
  answers.push(result.text);
}
await provider.forceFlush();
await provider.shutdown();
reportAnswers(answers);
