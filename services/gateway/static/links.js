// @ts-check
// modelevents UI: a URL from a run (a citation's source, a media URI, a hosted tool's evidence)
// becomes a link only when it is absolute http(s): javascript:, data:, blob:, file: and
// relative ones stay text.
import { el } from "./dom.js";

export const LINK_SCHEMES = ["http:", "https:"];

/**
 * The URL, normalized, when it may be a link; null otherwise.
 * @param {unknown} value
 * @returns {string | null}
 */
export function safeUrl(value) {
  if (typeof value !== "string") return null;
  try {
    const url = new URL(value);
    return LINK_SCHEMES.includes(url.protocol) ? url.href : null;
  } catch {
    return null;
  }
}

/**
 * Every string of a JSON value that may be a link, once each, in the order found.
 * @param {unknown} value
 * @param {string[]} [out]
 * @returns {string[]}
 */
export function collectUrls(value, out = []) {
  if (typeof value === "string") { if (safeUrl(value) && !out.includes(value)) out.push(value); }
  else if (Array.isArray(value)) value.forEach((v) => collectUrls(v, out));
  else if (value && typeof value === "object") Object.values(value).forEach((v) => collectUrls(v, out));
  return out;
}

/**
 * An external link that opens apart from the page, or the URL as inert text.
 * @param {unknown} value
 * @param {string} label
 * @param {Record<string, string>} [attrs]
 */
export function linkOrText(value, label, attrs = {}) {
  const href = safeUrl(value);
  return href ? el("a", Object.assign({ href, rel: "noopener noreferrer", target: "_blank" }, attrs), label)
    : el("span", { class: "inert-url" }, label);
}
