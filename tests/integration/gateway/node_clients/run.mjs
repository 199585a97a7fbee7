// Runs node SDK scenarios against one base URL per API and prints, as one JSON object keyed by
// scenario, what each SDK parsed (`result`) and the HTTP exchanges it made (`exchanges`).
//   node run.mjs '{"openai": ".../v1", "anthropic": "..."}' SESSION SCENARIO...
// SESSION prefixes the x-simulator-session header, so that the simulator counts the attempts of
// each run of a scenario apart. Scenarios run concurrently.
import { scenarios as aiSdk } from "./ai_sdk.mjs";
import { settled } from "./keeping.mjs";
import { scenarios as openaiNpm } from "./openai_npm.mjs";

// The AI SDK prints its warnings on stdout, which carries the results; they are in its parts.
globalThis.AI_SDK_LOG_WARNINGS = false;
const all = { ...openaiNpm, ...aiSdk };
const [targetJson, session, ...names] = process.argv.slice(2);
const unknown = names.filter((name) => !(name in all));
if (!targetJson || !session || names.length === 0 || unknown.length > 0) {
  process.stderr.write(`usage: node run.mjs TARGET_JSON SESSION SCENARIO...\n`
    + `unknown: ${unknown.join(", ")}\nscenarios: ${Object.keys(all).join(", ")}\n`);
  process.exit(2);
}
const target = JSON.parse(targetJson);

async function one(name) {
  const exchanges = [];
  const call = { target, exchanges, session: `${session}-${name}` };
  try {
    const result = await all[name](call);
    return [name, { result, exchanges: await settled(exchanges) }];
  } catch (error) {
    // Unexpected: the test shows it with the exchanges made so far.
    return [name, { thrown: String(error?.stack ?? error), exchanges: await settled(exchanges) }];
  }
}

const results = Object.fromEntries(await Promise.all(names.map(one)));
process.stdout.write(`${JSON.stringify(results)}\n`);
