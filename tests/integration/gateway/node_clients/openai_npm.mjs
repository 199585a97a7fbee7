// Scenarios of the `openai` npm package: each calls the API at `target.openai` as an
// application would and returns what the SDK parsed, as plain JSON.
import { OpenAI } from "../../../../tools/node-clients/sdks.mjs";
import { keepingFetch } from "./keeping.mjs";

const WEATHER = {
  type: "function", name: "get_weather", description: "weather in a city", strict: false,
  parameters: { type: "object", properties: { city: { type: "string" } }, required: ["city"] },
};

function client({ target, exchanges, session }, options = {}) {
  return new OpenAI({
    baseURL: target.openai, apiKey: "sk-node-client", maxRetries: 0,
    fetch: keepingFetch(exchanges), defaultHeaders: { "x-simulator-session": session },
    ...options,
  });
}

async function collect(stream) {
  const items = [];
  for await (const item of stream) items.push(item);
  return items;
}

function failure(error) {
  if (!(error instanceof OpenAI.APIError)) throw error;
  return {
    class: error.constructor.name, status: error.status, code: error.code, type: error.type,
    param: error.param, message: error.message,
    retryAfterMs: error.headers?.get("retry-after-ms") ?? null,
  };
}

export const scenarios = {
  "openai-npm/chat-stream": async (call) => {
    const chunks = await collect(await client(call).chat.completions.create({
      model: "sim:openai-chat/reasoning-then-text", stream: true,
      stream_options: { include_usage: true },
      messages: [{ role: "user", content: "capital?" }],
    }));
    return {
      chunks,
      text: chunks.map((c) => c.choices[0]?.delta?.content ?? "").join(""),
      finish: chunks.flatMap((c) => c.choices.map((choice) => choice.finish_reason)),
      usage: chunks.filter((c) => c.usage).map((c) => c.usage),
    };
  },
  "openai-npm/chat-object": async (call) => {
    const completion = await client(call).chat.completions.create({
      model: "sim:openai-chat/tool-call",
      messages: [{ role: "user", content: "weather in Paris?" }],
      tools: [{ type: "function", function: {
        name: WEATHER.name, description: WEATHER.description, parameters: WEATHER.parameters,
      } }],
    });
    return { completion };
  },
  "openai-npm/responses-stream": async (call) => {
    const events = await collect(await client(call).responses.create({
      model: "sim:openai-responses/tool-call-parallel", input: "weather in Paris and Rome?",
      tools: [WEATHER], stream: true,
    }));
    const final = events.at(-1).response;
    return {
      events,
      types: events.map((e) => e.type),
      calls: final.output.filter((i) => i.type === "function_call")
        .map((i) => [i.name, i.arguments, i.call_id]),
      usage: final.usage,
    };
  },
  "openai-npm/rate-limited-retried": async (call) => {
    // maxRetries 2 (the SDK's default): the 429's retry-after-ms says when to try again.
    const response = await client(call, { maxRetries: 2 }).responses.create({
      model: "sim:openai-responses/rate-limited-once", input: "hi",
    });
    return { response, text: response.output_text };
  },
  "openai-npm/rate-limited-raised": async (call) => {
    try {
      await client(call).responses.create({
        model: "sim:openai-responses/rate-limited-once", input: "hi",
      });
    } catch (error) {
      return { error: failure(error) };
    }
    return { error: null };
  },
};
