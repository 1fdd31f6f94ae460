// Context Lanes inspector: plain JS modules, no build step. Talks to the /v1 API with the
// tab's bearer token (from ?token=, kept in sessionStorage); live updates come from the
// session's event stream (server-sent events read with fetch, so the token stays in a
// header) plus a slow poll. Everything from the server is inserted as text, never HTML.
import { renderEpisodes } from "./episodes.js";
import { addEvent, initEvents, renderEvents, resetEvents } from "./events.js";
import { initLanes, renderLanes } from "./lanes.js";
import { loadLegend } from "./legend.js";
import { renderTimeline } from "./timeline.js";
import { $, api, el, fmt, MAIN_LANE, pct, state, TOKEN_KEY } from "./util.js";
import { closeItem, renderItems, renderReport, showItem } from "./working_set.js";

const POLL_MS = 4000;

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
    const turns = `${fmt(s.turns)} ${s.turns === 1 ? "turn" : "turns"}`;
    const item = el("li", { "data-session-id": s.session_id, title: s.session_id },
      el("span", { class: "task" }, s.first_task ? clip(s.first_task, 90) : "(no task yet)"),
      el("span", { class: "meta" }, [s.mode, s.config.model || "", turns, `active ${ago(s.last_activity || s.created_at)}`]
        .filter(Boolean).join(" · ")),
      el("span", { class: "sid" }, s.session_id));
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

function clip(text, chars) {
  const line = text.replace(/\s+/g, " ").trim();
  return line.length > chars ? `${line.slice(0, chars - 1)}…` : line;
}

// "just now", "5 min ago", "3 h ago", else the date: when a session last stored something.
function ago(when) {
  const seconds = (Date.now() - new Date(when).getTime()) / 1000;
  if (seconds < 60) return "just now";
  if (seconds < 3600) return `${Math.floor(seconds / 60)} min ago`;
  if (seconds < 86400) return `${Math.floor(seconds / 3600)} h ago`;
  return new Date(when).toLocaleDateString();
}

// --- one session ----------------------------------------------------------------------------

async function openSession(sessionId) {
  stopLive();
  Object.assign(state, { sessionId, info: null, lane: MAIN_LANE, reports: {}, children: [], events: [], lastEventId: 0,
                         filters: { kind: "", lane: "" } });
  for (const li of document.querySelectorAll("#sessions li")) {
    li.classList.toggle("selected", li.dataset.sessionId === sessionId);
  }
  $("#placeholder").hidden = !!sessionId;
  $("#session").hidden = !sessionId;
  closeItem();
  resetEvents();
  if (!sessionId) return;
  $("#session-id").textContent = sessionId;
  $("#items tbody").replaceChildren();
  await refresh();
  await loadEvents();
  startLive();
}

function setError(message) {
  const node = $("#error");
  node.hidden = !message;
  node.textContent = message || "";
}

// A finished subagent's context no longer changes: asked once, then kept.
async function refreshChildren(sessionId) {
  const children = await api(`/v1/sessions/${sessionId}/subagents`).catch(() => []);
  if (sessionId !== state.sessionId) return;
  state.children = children;
  await Promise.all(children.map(async (child) => {
    const known = state.reports[child.lane];
    if (known && known.finished) return;
    try {
      const report = await api(`/v1/sessions/${sessionId}/subagents/${child.lane}/context`);
      if (sessionId === state.sessionId) state.reports[child.lane] = { ...report, finished: child.state !== "running" };
    } catch (_) { /* still starting: next time */ }
  }));
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
      refreshChildren(sessionId),
    ]);
    if (sessionId !== state.sessionId) return;
    if (info.status === "fulfilled") renderInfo(info.value);
    if (report.status === "fulfilled") {
      state.reports[MAIN_LANE] = report.value;
      setError(null);
    } else if (report.reason.status === 503) {
      setError("The session is still starting…");
    } else {
      setError(`Context unavailable: ${report.reason.message}`);
    }
    if (episodes.status === "fulfilled") renderEpisodes(episodes.value);
    if (info.status === "rejected" && info.reason.status === 404) setError("No such session for this token.");
    renderLane();
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

// What depends on the selected lane: its working set, items, timeline; and the lanes tree.
function renderLane() {
  const report = state.reports[state.lane];
  $("#lane-missing").hidden = !!report;
  if (report) renderReport(report, state.lane);
  renderTimeline(state.events, state.lane, report);
  renderLanes();
}

function selectLane(lane) {
  state.lane = lane;
  state.filters.lane = lane;  // the events follow the lane chosen in the tree
  renderLane();
  renderEvents();
}

// Usage is what the provider reported for the session's model calls (SessionStatus.usage:
// prompt, cached, completion tokens, cost units); absent or with no calls (an external agent
// calls its model itself), nothing is shown rather than zeros.
function renderUsage(usage) {
  const node = $("#usage");
  node.hidden = !usage || typeof usage !== "object" || usage.calls === 0;
  if (node.hidden) return;
  const pick = (...names) => names.map((n) => usage[n]).find((v) => typeof v === "number");
  const prompt = pick("prompt_tokens", "prompt", "input_tokens");
  const cached = pick("cached_tokens", "cached", "cache_read_tokens");
  const completion = pick("completion_tokens", "completion", "output_tokens");
  const cost = pick("cost", "cost_usd", "total_cost");
  const parts = [];
  if (prompt !== undefined) parts.push(`prompt ${fmt(prompt)} tokens`);
  if (cached !== undefined) parts.push(`cached ${fmt(cached)}` + (prompt ? ` (${pct(cached, prompt)} cache hits)` : ""));
  if (completion !== undefined) parts.push(`completion ${fmt(completion)}`);
  if (cost !== undefined) parts.push(`cost ${cost.toFixed(4)} units`);
  if (typeof usage.token_ratio === "number" && usage.token_ratio !== 1) {
    parts.push(`budget calibrated ×${usage.token_ratio.toFixed(2)}`);
  }
  if (!parts.length) {
    for (const [key, value] of Object.entries(usage)) if (typeof value === "number") parts.push(`${key} ${fmt(value)}`);
  }
  node.textContent = `usage: ${parts.join(" · ")}`;
}

function renderInfo(info) {
  state.info = info;
  $("#session-mode").textContent = `${info.mode} mode`;
  $("#session-workflow").textContent = info.workflow ? info.workflow.status.toLowerCase() : "unknown";
  const s = info.status;
  const tasks = $("#tasks");
  tasks.replaceChildren();
  if (s) {
    $("#session-status").textContent =
      `model ${info.config.model || "?"} · turns ${fmt(s.turns)} · items ${fmt(s.items)}` + (s.closed ? " · closed" : "");
    for (const t of s.tasks.slice(-8)) {
      tasks.append(el("span", { class: `tag task state-${t.state}`, "data-task-id": t.task_id, "data-state": t.state,
                                title: t.error || "" }, `${t.task_id} ${t.state} · ${t.turns} turns`));
    }
    if (s.tasks.length > 8) tasks.append(el("span", { class: "dim" }, ` (${s.tasks.length - 8} earlier)`));
    renderUsage(s.usage);
  } else {
    $("#session-status").textContent = info.status_error || "";
    renderUsage(null);
  }
}

// --- events -----------------------------------------------------------------------------------

async function loadEvents() {
  const sessionId = state.sessionId;
  for (let pages = 0; pages < 50; pages += 1) {
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
          if (event && event.event_id && addEvent(event)) scheduleRefresh();
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
  state.onUnauthorized = showLogin;
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
  $("#show-omitted").addEventListener("change", () => { if (state.reports[state.lane]) renderItems(state.reports[state.lane]); });
  $("#items tbody").addEventListener("click", (click) => {
    const row = click.target.closest("tr[data-item-id]");
    if (row) showItem(row.dataset.itemId);
  });
  $("#item-close").addEventListener("click", closeItem);
  document.addEventListener("keydown", (key) => { if (key.key === "Escape") closeItem(); });
  initLanes(selectLane);
  initEvents({ changed: () => { renderTimeline(state.events, state.lane, state.reports[state.lane]); renderLanes(); },
               showItem });
  window.addEventListener("hashchange", () => openSession(selectedFromHash()).catch((e) => setError(e.message)));
  loadLegend().catch((error) => { $("#legend-about").textContent = `legend unavailable: ${error.message}`; });
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
  $("#login").hidden = true;
  $("#app").hidden = false;
  await openSession(selectedFromHash()).catch((error) => setError(error.message));
}

start();
