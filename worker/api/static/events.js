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

const plural = (n, word) => `${fmt(n)} ${word}${n === 1 ? "" : "s"}`;
const turnOf = (p) => (p.turn !== null && p.turn !== undefined ? `, turn ${p.turn + 1}` : "");
const taskOf = (p) => (p.task_id ? ` (${p.task_id}${turnOf(p)})` : "");

// Each kind of event as a sentence with its key figures; a kind without one lists its fields.
const SENTENCES = {
  "item.added": (p) => `Stored ${p.kind} ${p.item_id}: ${plural(p.tokens, "token")}.`,
  "item.archived": (p) => `Archived ${p.item_id} out of the working set (${p.reason || "no reason given"}).`,
  "context.request": (p) => `Request of ${fmt(p.request_tokens)} of ${fmt(p.budget)} tokens planned${taskOf(p)}; ` +
    `working set ${fmt(p.working_set_tokens)} tokens` + (p.ladder && p.ladder !== "full" ? `, on the ${p.ladder} rung.` : "."),
  "context.request.unfit": (p) => `The request did not fit: ${fmt(p.request_tokens)} tokens over a budget of ${fmt(p.budget)}.`,
  "context.assembly": (p) => `Task assembly: ${fmt(p.tokens_before)} → ${fmt(p.tokens_after)} tokens.`,
  "context.budget.notice": (p) => `Told the model of its budget (${fmt(p.budget)} tokens; notice ${p.streak} of the session).`,
  "context.recovery.completed": (p) => {
    const repairs = Object.entries(p).filter(([, v]) => typeof v === "number" && v > 0);
    return repairs.length ? `Recovered: ${repairs.map(([k, v]) => `${k.replaceAll("_", " ")} ${v}`).join(", ")}.`
      : "Recovery checked the session: nothing to repair.";
  },
  "context.condensation.started": (p) => `Condensing ${plural(p.items, "item")} (${fmt(p.source_tokens)} tokens) with the LLM.`,
  "context.condensation.succeeded": (p) => `The LLM condensed the history` +
    (p.input_tokens ? ` (${fmt(p.input_tokens)} tokens in, ${fmt(p.output_tokens)} out, ${plural(p.attempts, "attempt")})` : "") + ".",
  "context.condensation.discarded": (p) => `The LLM's condensation was discarded: ${(p.errors || []).join("; ") || "invalid"}.`,
  "context.condensation.skipped": (p) => `No LLM condensation: ${p.reason}.`,
  "context.overflow.planned": (p) => `The request is over the budget: trying the ${p.next} rung.`,
  "task.started": (p) => `Task ${p.task_id} started.`,
  "task.queued": (p) => `Task ${p.task_id} queued behind the running one.`,
  "task.completed": (p) => `Task ${p.task_id} completed after ${plural(p.turns, "turn")}.`,
  "task.failed": (p) => `Task ${p.task_id} failed after ${plural(p.turns, "turn")}: ${p.error || p.error_type || "no cause given"}.`,
  "model.usage": (p) => `${p.model} read ${fmt(p.prompt)} tokens (${fmt(p.cached)} cached) and wrote ${fmt(p.completion)}` +
    (p.kind && p.kind !== "agent" ? ` (${p.kind})` : "") + ".",
  "episode.begun": (p) => `Episode ${p.episode_id} (${p.kind}) began: ${p.goal}`,
  "episode.ended": (p) => `Episode ${p.episode_id} ended` + (p.conclusion ? `: ${p.conclusion}` : "."),
  "episode.abandoned": (p) => `Episode ${p.episode_id} abandoned (${p.reason}).`,
  "lane.spawned": (p) => `Subagent lane ${p.lane} started, sharing ${plural(p.shared_prefix_entries, "item")} ` +
    `(${fmt(p.shared_prefix_tokens)} tokens) of this lane's prefix.`,
  "note.pinned": (p) => `Pinned note ${p.item_id || ""}`.trim() + ".",
  "capability.admitted": (p) => `Capability ${p.name || p.item_id || ""} admitted`.trim() + (p.tokens ? ` (${fmt(p.tokens)} tokens).` : "."),
};

export function summary(event) {
  const p = event.payload || {};
  const sentence = SENTENCES[event.kind];
  if (sentence) {
    try {
      return sentence(p);
    } catch {
      // a payload of another shape (an older run's): its fields below
    }
  }
  if (event.kind.startsWith("context.compaction.")) {
    return `Compaction (${event.kind.slice(19)}): ${fmt(p.tokens_before)} → ${fmt(p.tokens_after)} tokens, ` +
      `${plural(p.archived || 0, "item")} archived` + (p.applied === false ? " (not applied)." : ".");
  }
  return Object.entries(p).filter(([, v]) => typeof v !== "object").map(([k, v]) => `${k} ${v}`).join(", ");
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
