// @ts-check
// modelevents UI: the gateway's API, called with the token typed into the page (kept in the
// tab's session storage, sent as `Authorization: Bearer`).

const TOKEN_KEY = "modelevents.token";

let token = sessionStorage.getItem(TOKEN_KEY) || "";

/** The token the page calls with ("" for none). */
export function currentToken() {
  return token;
}

/** @param {string} value the new token ("" for none) */
export function setToken(value) {
  token = value;
  if (token) sessionStorage.setItem(TOKEN_KEY, token); else sessionStorage.removeItem(TOKEN_KEY);
}

/**
 * fetch, with the token.
 * @param {string} path
 * @param {RequestInit & {headers?: Record<string, string>}} [options]
 */
export function api(path, options = {}) {
  /** @type {Record<string, string>} */
  const headers = Object.assign({}, options.headers || {});
  if (token) headers.Authorization = "Bearer " + token;
  return fetch(path, Object.assign({}, options, { headers }));
}

/** An answer that was not 2xx; `status` is its HTTP status. */
export class ApiError extends Error {
  /** @param {number} status @param {string} message */
  constructor(status, message) {
    super(`${status}: ${message}`);
    this.status = status;
  }
}

/**
 * The JSON body of a 2xx answer; an ApiError with the gateway's `error` otherwise.
 * @param {string} path
 * @param {RequestInit & {headers?: Record<string, string>}} [options]
 * @returns {Promise<any>}
 */
export async function apiJson(path, options) {
  const response = await api(path, options);
  let body = null;
  try { body = await response.json(); } catch { body = null; }
  if (!response.ok) throw new ApiError(response.status, (body && body.error) || response.statusText);
  return body;
}

/**
 * What a refusal says: its JSON `error`, or the status text.
 * @param {Response} response
 * @returns {Promise<string>}
 */
export async function refusalText(response) {
  try { return (await response.json()).error || response.statusText; } catch { return response.statusText; }
}
