// Context Lanes inspector: plain JS, no build step. Talks to the /v1 API with the tab's
// bearer token (from ?token=, kept in sessionStorage); live updates come from the
// session's event stream (server-sent events read with fetch, so the token stays in a
// header) plus a slow poll. Everything from the server is inserted as text, never HTML.
"use strict";

const TOKEN_KEY = "lanes-token";
const POLL_MS = 4000;
const MAX_EVENTS = 1000;
const LIFECYCLES = ["pinned", "active", "retained"];
const KIND_COLORS = {
  system: "#64748b", user: "#8b5cf6", assistant: "#0ea5e9", tool_result: "#22c55e", note: "#d946ef",
  decision: "#f43f5e", handoff: "#14b8a6", memory: "#f59e0b", summary: "#fb923c", checkpoint: "#a3a3a3",
  capability: "#6366f1", episodes: "#84cc16",
};

const state = {
  token: null, sessionId: null, report: null, events: [], lastEventId: 0, stream: null, poll: null,
  refreshTimer: null, refreshing: false, cursor: null, streamAlive: false,
};

const $ = (sel) => document.querySelector(sel);

function el(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs)) {
    if (key === "class") node.className = value;
    else if (key === "style") node.style.cssText = value;
    else if (key.startsWith("data-") || key === "title") node.setAttribute(key, value);
    else node[key] = value;
  }
  for (const child of children) {
    if (child === null || child === undefined) continue;
    node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return node;
}

const fmt = (n) => Number(n || 0).toLocaleString("en-US");

class ApiError extends Error {
  constructor(status, message) { super(message); this.status = status; }
}

async function api(path, options = {}) {
  const response = await fetch(path, {
    ...options, headers: { Authorization: `Bearer ${state.token}`, ...(options.headers || {}) },
  });
  let body = null;
  try { body = await response.json(); } catch (_) { /* not JSON */ }
  if (response.status === 401) {
    showLogin("The token was rejected.");
    throw new ApiError(401, "unauthorized");
  }
  if (!response.ok) {
    throw new ApiError(response.status, (body && body.error && body.error.message) || response.statusText);
  }
  return body;
}

// --- token ----------------------------------------------------------------------------------

function takeToken() {
  const url = new URL(window.location.href);
  const fromUrl = url.searchParams.get("token");
  if (fromUrl) {
    sessionStorage.setItem(TOKEN_KEY, fromUrl);
    url.searchParams.delete("token");  // keep it out of the address bar and history
    history.replaceState(null, "", url.pathname + url.search + url.hash);
  }
  return sessionStorage.getItem(TOKEN_KEY);
}

function showLogin(message) {
  stopLive();
  $("#app").hidden = true;
  $("#login").hidden = false;
  $("#connection").textContent = message || "not connected";
}

function showApp() {
  $("#login").hidden = true;
  $("#app").hidden = false;
}

// --- sessions list --------------------------------------------------------------------------

async function loadSessions(append = false) {
  const query = new URLSearchParams({ limit: "50" });
  if (append && state.cursor) query.set("cursor", state.cursor);
  const page = await api(`/v1/sessions?${query}`);
  $("#connection").textContent = "connected";
  state.cursor = page.next_cursor;
  const list = $("#sessions");
  if (!append) list.replaceChildren();
  for (const s of page.sessions) {
    const item = el("li", { "data-session-id": s.session_id, title: s.session_id },
      el("span", { class: "sid" }, s.session_id),
      el("span", { class: "meta" }, `${s.mode} · ${s.config.model || ""} · ${new Date(s.created_at).toLocaleString()}`));
    item.addEventListener("click", () => { window.location.hash = `session=${encodeURIComponent(s.session_id)}`; });
    if (s.session_id === state.sessionId) item.classList.add("selected");
    list.append(item);
  }
  if (!list.children.length) list.append(el("li", { class: "dim" }, "no sessions yet"));
  $("#more-sessions").hidden = !state.cursor;
}

function selectedFromHash() {
  const match = /session=([^&]+)/.exec(window.location.hash);
  return match ? decodeURIComponent(match[1]) : null;
}

// --- one session ----------------------------------------------------------------------------

async function openSession(sessionId) {
  stopLive();
  state.sessionId = sessionId;
  state.report = null;
  state.events = [];
  state.lastEventId = 0;
  for (const li of document.querySelectorAll("#sessions li")) {
    li.classList.toggle("selected", li.dataset.sessionId === sessionId);
  }
  $("#placeholder").hidden = !!sessionId;
  $("#session").hidden = !sessionId;
  if (!sessionId) return;
  $("#session-id").textContent = sessionId;
  $("#events").replaceChildren();
  $("#items tbody").replaceChildren();
  $("#item-view").hidden = true;
  await refresh();
  await loadEvents();
  startLive();
}

function setError(message) {
  const node = $("#error");
  node.hidden = !message;
  node.textContent = message || "";
}

async function refresh() {
  const sessionId = state.sessionId;
  if (!sessionId || state.refreshing) return;
  state.refreshing = true;
  try {
    const [info, report, episodes] = await Promise.allSettled([
      api(`/v1/sessions/${sessionId}`),
      api(`/v1/sessions/${sessionId}/context`),
      api(`/v1/sessions/${sessionId}/episodes`),
    ]);
    if (sessionId !== state.sessionId) return;
    if (info.status === "fulfilled") renderInfo(info.value);
    if (report.status === "fulfilled") {
      state.report = report.value;
      renderReport(report.value);
      setError(null);
    } else if (report.reason.status === 503) {
      setError("The session is still starting…");
    } else {
      setError(`Context unavailable: ${report.reason.message}`);
    }
    if (episodes.status === "fulfilled") renderEpisodes(episodes.value);
    if (info.status === "rejected" && info.reason.status === 404) setError("No such session for this token.");
  } finally {
    state.refreshing = false;
  }
}

function scheduleRefresh() {
  if (state.refreshTimer) return;
  state.refreshTimer = setTimeout(async () => {
    state.refreshTimer = null;
    try { await refresh(); } catch (_) { /* shown by refresh */ }
  }, 250);
}

function renderInfo(info) {
  $("#session-mode").textContent = `${info.mode} mode`;
  $("#session-workflow").textContent = info.workflow ? info.workflow.status.toLowerCase() : "unknown";
  const s = info.status;
  if (s) {
    const tasks = s.tasks.map((t) => `${t.task_id} ${t.state}${t.turns ? ` (${t.turns} turns)` : ""}`).join(", ");
    $("#session-status").textContent =
      `model ${info.config.model || "?"} · turns ${s.turns} · items ${s.items}` + (tasks ? ` · ${tasks}` : "");
  } else {
    $("#session-status").textContent = info.status_error || "";
  }
}

function colorOf(kind) {
  if (Object.hasOwn(KIND_COLORS, kind)) return KIND_COLORS[kind];
  let hash = 0;
  for (const ch of kind) hash = (hash * 31 + ch.charCodeAt(0)) >>> 0;
  return `hsl(${hash % 360} 55% 55%)`;
}

function renderBar(bar, legend, parts, scale) {
  bar.replaceChildren();
  legend.replaceChildren();
  for (const [name, tokens, color] of parts) {
    if (tokens <= 0) continue;
    const pct = (100 * tokens) / scale;
    bar.append(el("div", {
      class: "seg", "data-name": name, title: `${name}: ${fmt(tokens)} tokens`,
      style: `width:${pct}%;background:${color}`,
    }));
    legend.append(el("span", {}, el("span", { class: "sw", style: `background:${color}` }), `${name} ${fmt(tokens)}`));
  }
}

function renderReport(report) {
  const scale = Math.max(report.budget, report.working_set_tokens, 1);
  renderBar($("#bar-lifecycle"), $("#legend-lifecycle"),
    LIFECYCLES.map((lc) => [lc, report.tokens_by_lifecycle[lc] || 0, `var(--${lc})`]), scale);
  const kinds = Object.entries(report.tokens_by_kind).sort((a, b) => b[1] - a[1]);
  renderBar($("#bar-kind"), $("#legend-kind"), kinds.map(([k, t]) => [k, t, colorOf(k)]), scale);
  $("#budget-text").textContent =
    `${fmt(report.working_set_tokens)} / ${fmt(report.budget)} tokens (${(100 * report.pressure).toFixed(1)}% pressure)`;
  $("#compactions").textContent = String(report.compactions);
  $("#budget-more").textContent =
    ` · tool definitions ${fmt(report.tool_definition_tokens)} tokens · usable input ${fmt(report.usable_input)}` +
    (report.active_episodes.length ? ` · active episodes: ${report.active_episodes.join(", ")}` : "");
  renderItems(report);
}

function renderItems(report) {
  const showOmitted = $("#show-omitted").checked;
  const rows = report.items.slice().sort((a, b) => a.seq - b.seq || a.id.localeCompare(b.id));
  const body = $("#items tbody");
  body.replaceChildren();
  let shown = 0;
  for (const item of rows) {
    if (item.projection === "omitted" && !showOmitted) continue;
    shown += 1;
    const tr = el("tr", { class: `lc-${item.lifecycle} pj-${item.projection}`, "data-item-id": item.id },
      el("td", { class: "num" }, item.seq),
      el("td", { class: "mono" }, item.id),
      el("td", {}, el("span", { class: "sw-inline", style: `color:${colorOf(item.kind)}` }, "■ "), item.kind),
      el("td", {}, el("span", { class: `state ${item.lifecycle}` }, item.lifecycle)),
      el("td", {}, item.projection),
      el("td", { class: "num" }, fmt(item.tokens)),
      el("td", { class: "reason" }, item.reason),
      el("td", {}, item.episode || ""));
    tr.addEventListener("click", () => showItem(item.id));
    body.append(tr);
  }
  $("#items-count").textContent = `${shown} shown of ${report.items.length}`;
}

async function showItem(itemId) {
  const view = $("#item-view");
  try {
    const item = await api(`/v1/sessions/${state.sessionId}/items/${encodeURIComponent(itemId)}?max_chars=20000`);
    const calls = (item.tool_calls || []).map((c) => `\n→ ${(c.function || c).name}(${(c.function || c).arguments})`).join("");
    view.textContent = `${item.item_id} · ${item.kind} · ${fmt(item.size_chars)} characters` +
      (item.truncated ? " (first 20,000 shown)" : "") + `\n\n${item.text}${calls}`;
  } catch (error) {
    view.textContent = `${itemId}: ${error.message}`;
  }
  view.hidden = false;
}

function renderEpisodes(list) {
  const ul = $("#episodes");
  ul.replaceChildren();
  const svg = $("#episode-graph");
  svg.replaceChildren();
  $("#episodes-empty").hidden = list.episodes.length > 0;
  if (!list.episodes.length) { svg.setAttribute("height", "0"); return; }
  const NS = "http://www.w3.org/2000/svg";
  const pos = {};
  const width = 150;
  list.episodes.forEach((ep, index) => {
    pos[ep.id] = { x: 10 + index * width, y: ep.kind === "action" ? 70 : 20 };
    ul.append(el("li", { "data-episode-id": ep.id },
      el("b", {}, ep.id), ` ${ep.kind || ""} · ${ep.status}`,
      ep.goal ? ` · goal: ${ep.goal}` : "", ep.conclusion ? ` · conclusion: ${ep.conclusion}` : "",
      ep.depends_on.length ? ` · depends on ${ep.depends_on.join(", ")}` : "",
      ` · ${ep.items} items, ${fmt(ep.tokens)} tokens`));
  });
  const defs = document.createElementNS(NS, "defs");
  const marker = document.createElementNS(NS, "marker");
  for (const [k, v] of Object.entries({ id: "arrow", markerWidth: 8, markerHeight: 8, refX: 8, refY: 4, orient: "auto" })) marker.setAttribute(k, v);
  const tip = document.createElementNS(NS, "path");
  tip.setAttribute("d", "M0,0 L8,4 L0,8 z");
  tip.setAttribute("fill", "#94a3b8");
  marker.append(tip);
  defs.append(marker);
  svg.append(defs);
  for (const ep of list.episodes) {
    for (const dep of ep.depends_on) {
      if (!pos[dep]) continue;
      const line = document.createElementNS(NS, "line");
      const a = pos[dep], b = pos[ep.id];
      for (const [k, v] of Object.entries({ x1: a.x + 120, y1: a.y + 12, x2: b.x, y2: b.y + 12, stroke: "#94a3b8", "marker-end": "url(#arrow)" })) line.setAttribute(k, v);
      svg.append(line);
    }
  }
  for (const ep of list.episodes) {
    const p = pos[ep.id];
    const rect = document.createElementNS(NS, "rect");
    const fill = ep.status === "active" ? "#dcfce7" : ep.status === "archived" ? "#f3f4f6" : "#e0f2fe";
    for (const [k, v] of Object.entries({ x: p.x, y: p.y, width: 120, height: 24, rx: 5, fill, stroke: "#94a3b8" })) rect.setAttribute(k, v);
    const text = document.createElementNS(NS, "text");
    text.setAttribute("x", p.x + 6);
    text.setAttribute("y", p.y + 16);
    text.textContent = ep.id.length > 17 ? `${ep.id.slice(0, 16)}…` : ep.id;
    const title = document.createElementNS(NS, "title");
    title.textContent = `${ep.id} (${ep.kind || "?"}, ${ep.status})`;
    rect.append(title);
    svg.append(rect, text);
  }
  svg.setAttribute("height", "104");
  svg.setAttribute("viewBox", `0 0 ${Math.max(300, 20 + list.episodes.length * width)} 104`);
}

// --- events -----------------------------------------------------------------------------------

function eventSummary(event) {
  const p = event.payload || {};
  if (event.kind === "item.added") return `${p.item_id} ${p.kind} · ${fmt(p.tokens)} tokens`;
  if (event.kind === "item.archived") return `${p.item_id} · ${p.reason || ""}`;
  if ("tokens_before" in p) return `${fmt(p.tokens_before)} → ${fmt(p.tokens_after)} tokens · ${p.archived || 0} archived`;
  return Object.entries(p).filter(([, v]) => typeof v !== "object").map(([k, v]) => `${k}=${v}`).join(" ").slice(0, 160);
}

function addEvent(event) {
  if (event.id <= state.lastEventId) return;
  state.lastEventId = event.id;
  state.events.push(event);
  const cls = event.kind.startsWith("context.") ? "context" : event.kind === "item.archived" ? "archived" : "";
  const li = el("li", { class: cls, value: event.id, "data-event-id": event.id, "data-kind": event.kind },
    el("span", { class: "dim" }, new Date(event.created_at).toLocaleTimeString(), " "),
    el("span", { class: "kind" }, event.kind), " ", eventSummary(event));
  const list = $("#events");
  list.prepend(li);
  while (list.children.length > MAX_EVENTS) list.lastChild.remove();
  $("#events-count").textContent = `${fmt(state.events.length)} (newest first)`;
}

async function loadEvents() {
  const sessionId = state.sessionId;
  for (let pages = 0; pages < 20; pages += 1) {
    const page = await api(`/v1/sessions/${sessionId}/events?after=${state.lastEventId}&limit=1000`);
    if (sessionId !== state.sessionId) return;
    page.events.forEach(addEvent);
    if (!page.has_more) break;
  }
}

function stopLive() {
  if (state.stream) state.stream.abort();
  state.stream = null;
  if (state.poll) clearInterval(state.poll);
  state.poll = null;
  setLive(false);
}

function setLive(on) {
  state.streamAlive = on;
  $("#live").classList.toggle("off", !on);
  $("#live").textContent = on ? "● live" : "○ polling";
}

async function streamEvents(sessionId, controller) {
  while (!controller.signal.aborted && sessionId === state.sessionId) {
    try {
      const response = await fetch(`/v1/sessions/${sessionId}/events/stream?after=${state.lastEventId}`, {
        headers: { Authorization: `Bearer ${state.token}` }, signal: controller.signal,
      });
      if (!response.ok || !response.body) throw new Error(`stream: HTTP ${response.status}`);
      setLive(true);
      const reader = response.body.getReader();
      const decoder = new TextDecoder();
      let buffer = "";
      for (;;) {
        const { value, done } = await reader.read();
        if (done) break;
        buffer += decoder.decode(value, { stream: true });
        let cut;
        while ((cut = buffer.indexOf("\n\n")) >= 0) {
          const block = buffer.slice(0, cut);
          buffer = buffer.slice(cut + 2);
          const data = block.split("\n").filter((l) => l.startsWith("data:")).map((l) => l.slice(5).trimStart()).join("\n");
          if (!data) continue;
          const event = JSON.parse(data);
          if (event && event.event_id) {
            addEvent(event);
            scheduleRefresh();
          }
        }
      }
    } catch (error) {
      if (controller.signal.aborted) return;
    }
    setLive(false);
    await new Promise((resolve) => setTimeout(resolve, 2000));
  }
}

function startLive() {
  const controller = new AbortController();
  state.stream = controller;
  streamEvents(state.sessionId, controller);
  state.poll = setInterval(() => { refresh().catch(() => {}); }, POLL_MS);
}

// --- start ------------------------------------------------------------------------------------

async function start() {
  state.token = takeToken();
  $("#login-form").addEventListener("submit", (event) => {
    event.preventDefault();
    const token = $("#token-input").value.trim();
    if (!token) return;
    sessionStorage.setItem(TOKEN_KEY, token);
    state.token = token;
    boot();
  });
  $("#refresh-sessions").addEventListener("click", () => loadSessions().catch(() => {}));
  $("#more-sessions").addEventListener("click", () => loadSessions(true).catch(() => {}));
  $("#show-omitted").addEventListener("change", () => { if (state.report) renderItems(state.report); });
  window.addEventListener("hashchange", () => openSession(selectedFromHash()).catch((e) => setError(e.message)));
  if (!state.token) { showLogin(); return; }
  await boot();
}

async function boot() {
  try {
    await loadSessions();
  } catch (error) {
    if (error.status !== 401) $("#connection").textContent = `error: ${error.message}`;
    return;
  }
  showApp();
  await openSession(selectedFromHash()).catch((error) => setError(error.message));
}

start();
