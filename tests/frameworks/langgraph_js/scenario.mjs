// LangGraph.js travel scenario: `createReactAgent` with the three tools and a
// `MemorySaver` thread, the chat model scripted (a `BaseChatModel` replaying the script's
// steps: only the LLM is fake), traced by OpenInference's LangChain.js instrumentation on
// the OpenTelemetry Node SDK, exported over OTLP/HTTP (JSON) to the receiver generate.py
// runs.
//
//   node scenario.mjs langgraph_js_openinference

import { OTLPTraceExporter } from '@opentelemetry/exporter-trace-otlp-http';
import { resourceFromAttributes } from '@opentelemetry/resources';
import { NodeTracerProvider } from '@opentelemetry/sdk-trace-node';
import { BatchSpanProcessor } from '@opentelemetry/sdk-trace-base';
import { LangChainInstrumentation } from '@arizeai/openinference-instrumentation-langchain';
import * as CallbackManagerModule from '@langchain/core/callbacks/manager';
import { BaseChatModel } from '@langchain/core/language_models/chat_models';
import { AIMessage } from '@langchain/core/messages';
import { tool } from '@langchain/core/tools';
import { MemorySaver } from '@langchain/langgraph';
import { createReactAgent } from '@langchain/langgraph/prebuilt';
import { z } from 'zod';

import {
  DESCRIPTIONS,
  TOOLS,
  loadScenario,
  modelSteps,
  reportAnswers,
} from '../node_shared/travel.mjs';

const variant = process.argv[2];
if (variant !== 'langgraph_js_openinference') throw new Error(`unknown scenario ${variant}`);
const scenario = loadScenario();

const provider = new NodeTracerProvider({
  resource: resourceFromAttributes({ 'service.name': scenario.service_name }),
  // Batched: one export per span (SimpleSpanProcessor) can exceed the exporter's limit of
  // concurrent requests, which drops spans.
  spanProcessors: [new BatchSpanProcessor(new OTLPTraceExporter())],
});
provider.register();
new LangChainInstrumentation({ tracerProvider: provider }).manuallyInstrument(
  CallbackManagerModule,
);

class ScriptedChatModel extends BaseChatModel {
  constructor(steps) {
    super({});
    this.steps = steps;
    this.next = 0;
  }

  _llmType() {
    return 'scripted';
  }

  // The script knows the tools: binding changes nothing.
  bindTools() {
    return this;
  }

  async _generate() {
    const step = this.steps[this.next++];
    if (step === undefined) throw new Error('the script has no more model steps');
    const message = new AIMessage({
      content: step.text ?? '',
      tool_calls: step.tool_calls.map((call) => ({
        name: call.name,
        args: call.arguments,
        id: call.id,
        type: 'tool_call',
      })),
      response_metadata: {
        finish_reason: step.tool_calls.length ? 'tool_calls' : 'stop',
        model_name: 'scripted-travel-model',
      },
    });
    return { generations: [{ text: step.text ?? '', message }] };
  }
}

const schemas = {
  get_weather: z.object({ city: z.string() }),
  search_flights: z.object({
    origin: z.string(),
    destination: z.string(),
    filters: z.object({ max_price: z.number(), cabin: z.string() }),
  }),
  book_flight: z.object({ flight_id: z.string() }),
};
const tools = Object.keys(TOOLS).map((name) =>
  tool(
    async (input) => {
      const result = TOOLS[name](input);
      return typeof result === 'string' ? result : JSON.stringify(result);
    },
    { name, description: DESCRIPTIONS[name], schema: schemas[name] },
  ),
);

const agent = createReactAgent({
  llm: new ScriptedChatModel(modelSteps(scenario)),
  tools,
  prompt: scenario.system_prompt,
  name: scenario.agent_name,
  checkpointSaver: new MemorySaver(),
});

const answers = [];
for (const turn of scenario.turns) {
  const state = await agent.invoke(
    { messages: [{ role: 'user', content: turn.query }] },
    { configurable: { thread_id: scenario.conversation_id } },
  );
  answers.push(state.messages.at(-1).content);
}
await provider.forceFlush();
await provider.shutdown();
reportAnswers(answers);
