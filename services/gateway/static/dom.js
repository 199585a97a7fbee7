// @ts-check
// modelevents UI: building the page's nodes. Nothing here touches the document when imported,
// so the pure modules that use it load in node's unit tests too.

/**
 * The page's element of that id (index.html has them all: a missing one is a bug, said at once).
 * @param {string} id
 * @returns {HTMLElement}
 */
export function $(id) {
  const node = document.getElementById(id);
  if (!node) throw new Error(`the page has no #${id}`);
  return node;
}

/** @typedef {Record<string, any>} Attrs */

/**
 * An element with its attributes (`class`, `text`, `dataset`, `on…` listeners, the rest as
 * attributes; null, undefined and false left out) and children (nodes, or text).
 * @param {string} tag
 * @param {Attrs | null} [attrs]
 * @param {...(Node | string | number | null | undefined)} children
 * @returns {HTMLElement}
 */
export function el(tag, attrs, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs || {})) {
    if (value === null || value === undefined || value === false) continue;
    if (key === "class") node.className = value;
    else if (key === "text") node.textContent = value;
    else if (key.startsWith("on")) node.addEventListener(key.slice(2), value);
    else if (key === "dataset") Object.assign(node.dataset, value);
    else node.setAttribute(key, value === true ? "" : value);
  }
  for (const child of children) {
    if (child === null || child === undefined) continue;
    node.append(child instanceof Node ? child : String(child));
  }
  return node;
}

/**
 * A run status as a badge.
 * @param {string} status
 */
export function badge(status) {
  return el("span", { class: `badge s-${status}`, text: status.replaceAll("_", " ") });
}

/** @param {number} ms */
export const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));
