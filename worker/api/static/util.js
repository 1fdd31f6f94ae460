// Shared by the inspector's modules: the page state, DOM helpers and the API call.
// Everything from the server is inserted as text (textContent, attributes), never as HTML.

export const TOKEN_KEY = "lanes-token";
export const MAIN_LANE = "main";

// One object the modules share; app.js resets it when another session is opened.
export const state = {
  token: null, sessionId: null, info: null,
  lane: MAIN_LANE,               // the lane whose working set, timeline and items are shown
  reports: {},                   // lane -> its context report
  children: [],                  // the session's subagent lanes (GET /subagents)
  events: [], lastEventId: 0,    // the whole log, oldest first; each event gets its number n (1, 2, ...)
  filters: { kind: "", lane: "" },
  stream: null, poll: null, refreshTimer: null, refreshing: false, cursor: null,
  onUnauthorized: () => {},
};

export const $ = (sel) => document.querySelector(sel);

export function el(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  setAttrs(node, attrs);
  for (const child of children) {
    if (child === null || child === undefined || child === false) continue;
    node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return node;
}

const SVG_NS = "http://www.w3.org/2000/svg";

export function svg(tag, attrs = {}, title = null) {
  const node = document.createElementNS(SVG_NS, tag);
  for (const [key, value] of Object.entries(attrs)) node.setAttribute(key, String(value));
  if (title) {
    const tip = document.createElementNS(SVG_NS, "title");
    tip.textContent = title;
    node.append(tip);
  }
  return node;
}

function setAttrs(node, attrs) {
  for (const [key, value] of Object.entries(attrs)) {
    if (value === null || value === undefined) continue;
    if (key === "class") node.className = value;
    else if (key === "style") node.style.cssText = value;
    else if (key.startsWith("data-") || key === "title" || key === "role" || key.startsWith("aria-")) node.setAttribute(key, value);
    else node[key] = value;
  }
}

export const fmt = (n) => Number(n || 0).toLocaleString("en-US");
export const pct = (part, whole) => (whole > 0 ? `${((100 * part) / whole).toFixed(1)}%` : "–");

// The lane an event belongs to: "main:events", "main:requests"... are namespaces of "main".
export const laneOf = (event) => String(event.lane || MAIN_LANE).split(":")[0];

export class ApiError extends Error {
  constructor(status, message) { super(message); this.status = status; }
}

export async function api(path, options = {}) {
  const response = await fetch(path, {
    ...options, headers: { Authorization: `Bearer ${state.token}`, ...(options.headers || {}) },
  });
  let body = null;
  try { body = await response.json(); } catch (_) { /* not JSON */ }
  if (response.status === 401) {
    state.onUnauthorized("The token was rejected.");
    throw new ApiError(401, "unauthorized");
  }
  if (!response.ok) {
    throw new ApiError(response.status, (body && body.error && body.error.message) || response.statusText);
  }
  return body;
}
