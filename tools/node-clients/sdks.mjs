// The pinned SDKs, re-exported for the scripts under tests/integration/gateway/node_clients/
// (an ES module resolves packages from its own folder up, so the tests import them from here).
export { default as OpenAI } from "openai";
export { jsonSchema, streamText, tool } from "ai";
export { createOpenAI } from "@ai-sdk/openai";
export { createAnthropic } from "@ai-sdk/anthropic";
