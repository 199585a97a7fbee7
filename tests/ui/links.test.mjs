// The UI's link allow-list (services/gateway/static/links.js): only absolute http(s) URLs
// become links; everything else a run carries stays text.
import assert from "node:assert/strict";
import { test } from "node:test";

import { collectUrls, safeUrl } from "../../services/gateway/static/links.js";

test("absolute http and https URLs are links, normalized", () => {
  assert.equal(safeUrl("https://tides.example.org/today"), "https://tides.example.org/today");
  assert.equal(safeUrl("HTTP://Example.ORG"), "http://example.org/");
});

test("every other scheme, relative URLs and non-strings stay text", () => {
  for (const value of ["javascript:alert(1)", "JavaScript:alert(1)", " javascript:alert(1)",
    "data:text/html,<script>alert(1)</script>", "blob:https://example.org/x", "file:///etc/passwd",
    "vbscript:x", "ftp://example.org/", "/relative", "example.org", "//example.org/x", "", "https://",
    null, undefined, 42, { href: "https://example.org" }]) {
    assert.equal(safeUrl(value), null, String(value));
  }
});

test("the links of a hosted tool's evidence: every http(s) string, once, in order", () => {
  const evidence = { results: [{ url: "https://a.example/1", title: "A" }, { url: "javascript:alert(1)" },
    { nested: ["https://b.example/2", "https://a.example/1", "plain text"] }], source: "http://c.example/" };
  assert.deepEqual(collectUrls(evidence), ["https://a.example/1", "https://b.example/2", "http://c.example/"]);
  assert.deepEqual(collectUrls(null), []);
});
