// Scenarios of the Vercel AI SDK (`ai` with `@ai-sdk/openai` and `@ai-sdk/anthropic`): each
// streams with streamText as an application would and returns every part of its fullStream and
// what the result resolved to, as plain JSON.
import {
  createAnthropic, createOpenAI, jsonSchema, streamText, tool,
} from "../../../../tools/node-clients/sdks.mjs";
import { keepingFetch } from "./keeping.mjs";

const WEATHER = {
  description: "weather in a city",
  inputSchema: jsonSchema({
    type: "object", properties: { city: { type: "string" } }, required: ["city"],
  }),
};
// The simulator validates a Responses function tool with the openai SDKs' types, which require
// `strict`; the AI SDK sends it when the tool says it.
const weather = tool({ ...WEATHER, strict: false });

function options({ exchanges, session }) {
  return {
    apiKey: "sk-node-client", fetch: keepingFetch(exchanges),
    headers: { "x-simulator-session": session },
  };
}

function plain(part) {
  // Errors become what a caller reads of them; Dates their ISO string.
  return JSON.parse(JSON.stringify(part, (key, value) => (value instanceof Error
    ? { name: value.name, message: value.message, statusCode: value.statusCode,
        isRetryable: value.isRetryable, responseBody: value.responseBody }
    : value)));
}

async function stream(model, prompt, tools, extra = {}) {
  const result = streamText({ model, prompt, tools, maxOutputTokens: 256, ...extra });
  const parts = [];
  for await (const part of result.fullStream) parts.push(plain(part));
  return {
    parts,
    text: await result.text,
    toolCalls: plain(await result.toolCalls),
    finishReason: await result.finishReason,
    usage: plain(await result.usage),
    response: plain({ ...(await result.response), messages: undefined }),
  };
}

export const scenarios = {
  "ai-sdk/openai-responses": async (call) => stream(
    createOpenAI({ ...options(call), baseURL: call.target.openai })(
      "sim:openai-responses/tool-call-parallel"),
    "weather in Paris and Rome?", { get_weather: weather }),
  "ai-sdk/openai-chat": async (call) => stream(
    createOpenAI({ ...options(call), baseURL: call.target.openai }).chat(
      "sim:openai-chat/tool-call"),
    "weather in Paris?", { get_weather: weather }),
  "ai-sdk/anthropic": async (call) => stream(
    createAnthropic({ ...options(call), baseURL: `${call.target.anthropic}/v1` })(
      "sim:anthropic-messages/tool-loop"),
    "weather in Oslo?", { get_weather: tool(WEATHER) }),
  "ai-sdk/rate-limited-retried": async (call) => stream(
    createOpenAI({ ...options(call), baseURL: call.target.openai })(
      "sim:openai-responses/rate-limited-once"),
    "hi", {}, { maxRetries: 2 }),
};
