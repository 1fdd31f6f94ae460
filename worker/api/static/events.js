// The session's event log: numbered per session (#1 is its first event, whatever the
// global ids), filtered by kind and by lane, newest first.
import { $, el, fmt, laneOf, MAIN_LANE, state } from "./util.js";

const MAX_SHOWN = 1000;
let renderTimer = null;
let onChange = () => {};
let openItem = () => {};

export function initEvents({ changed, showItem }) {
  onChange = changed;
  openItem = showItem;
  $("#filter-kind").addEventListener("change", () => { state.filters.kind = $("#filter-kind").value; renderEvents(); });
  $("#filter-lane").addEventListener("change", () => { state.filters.lane = $("#filter-lane").value; renderEvents(); });
  $("#events").addEventListener("click", (click) => {
    const li = click.target.closest("li[data-item-id]");
    if (li) openItem(li.dataset.itemId);
  });
}

export function summary(event) {
  const p = event.payload || {};
  if (event.kind === "item.added") return `${p.item_id} ${p.kind} · ${fmt(p.tokens)} tokens`;
  if (event.kind === "item.archived") return `${p.item_id} · ${p.reason || ""}`;
  if (event.kind === "context.request") {
    return `working set ${fmt(p.working_set_tokens)} · request ${fmt(p.request_tokens)} of ${fmt(p.budget)} tokens` +
      (p.task_id ? ` · ${p.task_id}` : "") + (p.turn !== null && p.turn !== undefined ? ` turn ${p.turn + 1}` : "");
  }
  if ("tokens_before" in p) return `${fmt(p.tokens_before)} → ${fmt(p.tokens_after)} tokens · ${p.archived || 0} archived`;
  return Object.entries(p).filter(([, v]) => typeof v !== "object").map(([k, v]) => `${k}=${v}`).join(" ").slice(0, 160);
}

export function addEvent(event) {
  if (event.id <= state.lastEventId) return false;
  state.lastEventId = event.id;
  event.n = state.events.length + 1;
  state.events.push(event);
  scheduleRender();
  return true;
}

function scheduleRender() {
  if (renderTimer) return;
  renderTimer = setTimeout(() => { renderTimer = null; renderEvents(); onChange(); }, 120);
}

export function matches(event, filters) {
  if (filters.lane && laneOf(event) !== filters.lane) return false;
  if (!filters.kind) return true;
  if (filters.kind.endsWith(".*")) return event.kind.startsWith(filters.kind.slice(0, -1));
  return event.kind === filters.kind;
}

// The filters offer what the log holds: every kind (grouped by its first word) and every lane.
function renderFilters() {
  const kinds = new Map();
  const lanes = new Map();
  for (const event of state.events) {
    kinds.set(event.kind, (kinds.get(event.kind) || 0) + 1);
    lanes.set(laneOf(event), (lanes.get(laneOf(event)) || 0) + 1);
  }
  for (const child of state.children) if (!lanes.has(child.lane)) lanes.set(child.lane, 0);
  // families: every dotted prefix of a kind ("context.*", "context.compaction.*"), each
  // listed before its kinds
  const families = new Map();
  for (const [kind, count] of kinds) {
    const words = kind.split(".");
    for (let depth = 1; depth < words.length; depth += 1) {
      const prefix = words.slice(0, depth).join(".");
      const family = families.get(prefix) || { count: 0, depth };
      family.count += count;
      families.set(prefix, family);
    }
  }
  const entries = [...kinds].map(([kind, count]) => ({ key: kind, value: kind, label: kind, count, depth: kind.split(".").length - 1 }));
  for (const [prefix, family] of families) {
    entries.push({ key: prefix, value: `${prefix}.*`, label: `${prefix}.*`, count: family.count, depth: family.depth - 1 });
  }
  entries.sort((a, b) => (a.key < b.key ? -1 : a.key > b.key ? 1 : 0));
  const kindSelect = $("#filter-kind");
  const kindOptions = [el("option", { value: "" }, `all kinds (${fmt(state.events.length)})`),
    ...entries.map((e) => el("option", { value: e.value }, `${"\u00a0\u00a0".repeat(e.depth)}${e.label} (${fmt(e.count)})`))];
  replaceOptions(kindSelect, kindOptions, state.filters.kind);
  const laneNames = [...lanes.keys()].sort((a, b) => (a === MAIN_LANE ? -1 : b === MAIN_LANE ? 1 : a.localeCompare(b)));
  replaceOptions($("#filter-lane"), [el("option", { value: "" }, "all lanes"),
    ...laneNames.map((lane) => el("option", { value: lane }, `${lane} (${fmt(lanes.get(lane))})`))], state.filters.lane);
}

function replaceOptions(select, options, selected) {
  if (selected && !options.some((o) => o.value === selected)) {
    options.push(el("option", { value: selected }, `${selected} (0)`));
  }
  select.replaceChildren(...options);
  select.value = selected;
}

export function renderEvents() {
  renderFilters();
  const shown = state.events.filter((e) => matches(e, state.filters));
  const list = $("#events");
  const rows = [];
  for (let i = shown.length - 1; i >= 0 && rows.length < MAX_SHOWN; i -= 1) {
    const event = shown[i];
    const lane = laneOf(event);
    const p = event.payload || {};
    const cls = [event.kind.startsWith("context.") ? "context" : "", event.kind === "item.archived" ? "archived" : ""];
    rows.push(el("li", {
      class: cls.join(" ").trim(), "data-n": event.n, "data-event-id": event.id, "data-kind": event.kind,
      "data-lane": lane, "data-item-id": typeof p.item_id === "string" ? p.item_id : null,
      title: `event #${event.n} of this session (log id ${event.id}, ${event.lane} seq ${event.seq})`,
    },
    el("span", { class: "n" }, `#${event.n}`),
    el("span", { class: "dim" }, new Date(event.created_at).toLocaleTimeString(), " "),
    lane !== MAIN_LANE ? el("span", { class: "tag lane-tag" }, lane) : null,
    el("span", { class: "kind" }, event.kind), " ", summary(event)));
  }
  list.replaceChildren(...rows);
  const filtered = state.filters.kind || state.filters.lane;
  $("#events-count").textContent = filtered
    ? `${fmt(shown.length)} of ${fmt(state.events.length)} shown (newest first)`
    : `${fmt(state.events.length)} (newest first)`;
}

export function resetEvents() {
  if (renderTimer) clearTimeout(renderTimer);
  renderTimer = null;
  $("#events").replaceChildren();
  $("#events-count").textContent = "";
}
