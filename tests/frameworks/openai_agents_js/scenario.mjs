// OpenAI Agents SDK for JavaScript/TypeScript travel scenario, traced by OpenInference's
// OpenAI Agents processor on the OpenTelemetry Node SDK, exported over OTLP/HTTP (JSON)
// to the receiver generate.py runs.
//
// The model is the SDK's own OpenAIResponsesModel on a real `openai` client whose
// `fetch` answers each POST /v1/responses with the script's next step as Responses API
// JSON: only the LLM endpoint is fake (no network).
//
//   node scenario.mjs openai_agents_js_openinference           # one agent
//   node scenario.mjs openai_agents_js_openinference_handoff   # triage hands turn 2 off

import { context } from '@opentelemetry/api';
import { OTLPTraceExporter } from '@opentelemetry/exporter-trace-otlp-http';
import { resourceFromAttributes } from '@opentelemetry/resources';
import { NodeTracerProvider } from '@opentelemetry/sdk-trace-node';
import { BatchSpanProcessor } from '@opentelemetry/sdk-trace-base';
import { setSession } from '@arizeai/openinference-core';
import { OpenAIAgentsInstrumentation } from '@arizeai/openinference-instrumentation-openai-agents';
import * as agents from '@openai/agents';
import { Agent, OpenAIResponsesModel, handoff, run, tool } from '@openai/agents';
import OpenAI from 'openai';
import { z } from 'zod';

import { DESCRIPTIONS, TOOLS, loadScenario, reportAnswers } from '../node_shared/travel.mjs';

const variant = process.argv[2];
const withHandoff = variant === 'openai_agents_js_openinference_handoff';
if (!withHandoff && variant !== 'openai_agents_js_openinference') {
  throw new Error(`unknown scenario ${variant}`);
}
const scenario = loadScenario();
const BOOKING_AGENT = 'booking-agent';
const BOOKING_TOOLS = ['search_flights', 'book_flight'];

const provider = new NodeTracerProvider({
  resource: resourceFromAttributes({ 'service.name': scenario.service_name }),
  // Batched: one export per span (SimpleSpanProcessor) can exceed the exporter's limit of
  // concurrent requests, which drops spans.
  spanProcessors: [new BatchSpanProcessor(new OTLPTraceExporter())],
});
provider.register();
new OpenAIAgentsInstrumentation({ tracerProvider: provider }).manuallyInstrument(agents);

const schemas = {
  get_weather: z.object({ city: z.string() }),
  search_flights: z.object({
    origin: z.string(),
    destination: z.string(),
    filters: z.object({ max_price: z.number(), cabin: z.string() }),
  }),
  book_flight: z.object({ flight_id: z.string() }),
};
function travelTool(name) {
  return tool({
    name,
    description: DESCRIPTIONS[name],
    parameters: schemas[name],
    execute: async (input) => {
      const result = TOOLS[name](input);
      return typeof result === 'string' ? result : JSON.stringify(result);
    },
    // What the model is told when a tool throws (the SDK default hides the message).
    errorFunction: (_context, error) => `Error: ${error.message}`,
  });
}

const booking = new Agent({
  name: BOOKING_AGENT,
  instructions: 'You book flights. Use the tools.',
  tools: BOOKING_TOOLS.map(travelTool),
});
const handoffName = handoff(booking).toolName;

// The script: every step of both turns; with the hand-off, turn 2 starts with the triage
// agent's transfer call, then the booking agent's steps.
const steps = [];
scenario.turns.forEach((turn, index) => {
  if (withHandoff && index === 1) {
    steps.push({ text: null, tool_calls: [{ id: 'call_h1', name: handoffName, arguments: {} }] });
  }
  steps.push(...turn.steps);
});

let next = 0;
function responseBody(model) {
  const step = steps[next];
  if (step === undefined) throw new Error('the script has no more model steps');
  const index = next++;
  const output = step.tool_calls.map((call) => ({
    type: 'function_call',
    id: `fc_${call.id}`,
    call_id: call.id,
    name: call.name,
    arguments: JSON.stringify(call.arguments),
    status: 'completed',
  }));
  if (step.text != null) {
    output.push({
      type: 'message',
      id: `msg_${index}`,
      role: 'assistant',
      status: 'completed',
      content: [{ type: 'output_text', text: step.text, annotations: [] }],
    });
  }
  return {
    id: `resp_${index}`,
    object: 'response',
    created_at: Math.floor(Date.now() / 1000),
    model,
    status: 'completed',
    output,
    parallel_tool_calls: true,
    tool_choice: 'auto',
    tools: [],
    usage: {
      input_tokens: 20,
      output_tokens: 10,
      total_tokens: 30,
      input_tokens_details: { cached_tokens: 0 },
      output_tokens_details: { reasoning_tokens: 0 },
    },
  };
}

const client = new OpenAI({
  apiKey: 'offline',
  baseURL: 'http://scripted-llm.invalid/v1',
  maxRetries: 0,
  fetch: async (url, init) => {
    if (!String(url).endsWith('/responses') || init?.method !== 'POST') {
      return new Response(JSON.stringify({ error: { message: `unscripted ${url}` } }), {
        status: 404,
      });
    }
    const request = JSON.parse(init.body);
    return new Response(JSON.stringify(responseBody(request.model)), {
      status: 200,
      headers: { 'content-type': 'application/json' },
    });
  },
});
const model = new OpenAIResponsesModel(client, 'scripted-travel-model');
booking.model = model;

const triage = new Agent({
  name: scenario.agent_name,
  instructions: scenario.system_prompt + (withHandoff ? ' Hand bookings to the booking agent.' : ''),
  model,
  tools: withHandoff ? [travelTool('get_weather')] : Object.keys(TOOLS).map(travelTool),
  handoffs: withHandoff ? [booking] : [],
});

let history = [];
const answers = [];
for (const turn of scenario.turns) {
  const input = [...history, { role: 'user', content: turn.query }];
  // OpenInference reads the session id from the active context when the run's root span
  // starts (openinference-core's setSession).
  const result = await context.with(
    setSession(context.active(), { sessionId: scenario.conversation_id }),
    () => run(triage, input, { workflowName: 'travel-workflow', groupId: scenario.conversation_id }),
  );
  history = result.history;
  answers.push(result.finalOutput);
}
await agents.getGlobalTraceProvider().forceFlush();
await provider.forceFlush();
await provider.shutdown();
reportAnswers(answers);
