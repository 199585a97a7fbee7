// The UI's lint rules (services/gateway/static/, tests/ui/), also applied to the node clients'
// scripts (tests/integration/gateway/node_clients/, tools/node-clients/): ESLint's recommended
// set, for browser ES modules, a module worker and node; run by scripts/lint.sh.
import js from "@eslint/js";
import globals from "globals";

export default [
  js.configs.recommended,
  {
    files: ["services/gateway/static/**/*.js"],
    languageOptions: { sourceType: "module", ecmaVersion: 2023, globals: globals.browser },
    rules: {
      eqeqeq: "error",
      "no-var": "error",
      "prefer-const": "error",
      "no-unused-vars": ["error", { args: "after-used", caughtErrors: "none" }],
    },
  },
  {
    files: ["services/gateway/static/stream-worker.js"],
    languageOptions: { globals: globals.sharedworker },
  },
  {
    files: ["tests/ui/**/*.mjs", "tests/integration/gateway/node_clients/*.mjs",
      "tools/node-clients/*.mjs"],
    languageOptions: { sourceType: "module", ecmaVersion: 2023, globals: globals.node },
  },
];
