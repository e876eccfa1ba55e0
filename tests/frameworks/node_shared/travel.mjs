// The travel scenario for Node.js stacks: the document node_support.py writes (turns,
// scripted model steps, names) and the three tools, returning exactly what the Python
// tools of harness.py return (the corpus truth is computed from those).
// Dependency-free on purpose: each stack imports it from its own directory.

import { readFileSync } from 'node:fs';

export function loadScenario() {
  const path = process.env.TRACEPASS_SCENARIO_FILE;
  if (!path) throw new Error('TRACEPASS_SCENARIO_FILE is not set (run through generate.py)');
  return JSON.parse(readFileSync(path, 'utf8'));
}

/** Every scripted model response, in order, across the turns. */
export function modelSteps(scenario) {
  return scenario.turns.flatMap((turn) => turn.steps);
}

export class ToolFailure extends Error {}

export function getWeather({ city }) {
  const known = { Paris: 'Sunny in Paris, 21 C', Rome: 'Rainy in Rome, 15 C' };
  return known[city] ?? `Unknown weather in ${city}`;
}

export function searchFlights({ origin, destination, filters }) {
  const flights = [
    { flight_id: 'FL-404', price: 120, cabin: 'economy' },
    { flight_id: 'FL-123', price: 180, cabin: 'economy' },
    { flight_id: 'FL-999', price: 650, cabin: 'business' },
  ];
  return flights.filter(
    (f) =>
      f.price <= (filters.max_price ?? Number.MAX_SAFE_INTEGER) &&
      f.cabin === (filters.cabin ?? f.cabin),
  );
}

export function bookFlight({ flight_id }) {
  if (flight_id === 'FL-404') throw new ToolFailure('flight FL-404 is sold out');
  return { confirmation: `CONF-${flight_id.slice(3)}`, flight_id };
}

export const DESCRIPTIONS = {
  get_weather: 'Current weather for a city.',
  search_flights: 'Search flights between two cities; `filters` has `max_price` (EUR) and `cabin`.',
  book_flight: 'Book a flight by id.',
};

export const TOOLS = { get_weather: getWeather, search_flights: searchFlights, book_flight: bookFlight };

/** Token usage every scripted response reports (the AI SDK's V3/V4 usage shape). */
export const SCRIPTED_USAGE = {
  inputTokens: { total: 20, noCache: 20, cacheRead: undefined, cacheWrite: undefined },
  outputTokens: { total: 10, text: 10, reasoning: undefined },
};

/**
 * A `doGenerate` for the AI SDK's mock language models (`MockLanguageModelV3` / `V4` from
 * `ai/test`): each call answers with the script's next step, text or tool calls (with the
 * script's call ids, inputs as JSON text).
 */
export function scriptedGenerate(scenario) {
  const steps = modelSteps(scenario);
  let next = 0;
  return async () => {
    const step = steps[next++];
    if (step === undefined) throw new Error('the script has no more model steps');
    if (step.text != null) {
      return {
        content: [{ type: 'text', text: step.text }],
        finishReason: { unified: 'stop', raw: 'stop' },
        usage: SCRIPTED_USAGE,
        warnings: [],
      };
    }
    return {
      content: step.tool_calls.map((call) => ({
        type: 'tool-call',
        toolCallId: call.id,
        toolName: call.name,
        input: JSON.stringify(call.arguments),
      })),
      finishReason: { unified: 'tool-calls', raw: 'tool_calls' },
      usage: SCRIPTED_USAGE,
      warnings: [],
    };
  };
}

/** The last line a script prints: what generate.py checks against the script. */
export function reportAnswers(answers) {
  console.log(JSON.stringify({ answers }));
}
