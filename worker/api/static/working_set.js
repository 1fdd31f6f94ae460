// One lane's working set: budget bars by lifecycle and kind, the items table, and the side
// panel with an item's exact stored text.
import { describe, explain, renderLegend } from "./legend.js";
import { $, api, el, fmt, state } from "./util.js";

const LIFECYCLES = ["pinned", "active", "retained"];
const KIND_COLORS = {
  system: "#64748b", user: "#8b5cf6", assistant: "#0ea5e9", tool_result: "#22c55e", note: "#d946ef",
  decision: "#f43f5e", handoff: "#14b8a6", memory: "#f59e0b", summary: "#fb923c", checkpoint: "#a3a3a3",
  capability: "#6366f1", episodes: "#84cc16",
};
const ITEM_VIEW_CHARS = 20000;

export function colorOf(kind) {
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
    bar.append(el("div", {
      class: "seg", "data-name": name, title: `${name}: ${fmt(tokens)} tokens`,
      style: `width:${(100 * tokens) / scale}%;background:${color}`,
    }));
    legend.append(el("span", {}, el("span", { class: "sw", style: `background:${color}` }), `${name} ${fmt(tokens)}`));
  }
}

export function renderReport(report, lane) {
  $("#working-set-lane").textContent = lane;
  const scale = Math.max(report.budget, report.working_set_tokens, 1);
  renderBar($("#bar-lifecycle"), $("#legend-lifecycle"),
    LIFECYCLES.map((lc) => [lc, report.tokens_by_lifecycle[lc] || 0, `var(--${lc})`]), scale);
  const kinds = Object.entries(report.tokens_by_kind).sort((a, b) => b[1] - a[1]);
  renderBar($("#bar-kind"), $("#legend-kind"), kinds.map(([k, t]) => [k, t, colorOf(k)]), scale);
  $("#budget-text").textContent =
    `${fmt(report.working_set_tokens)} / ${fmt(report.budget)} tokens (${(100 * report.pressure).toFixed(1)}% pressure)`;
  $("#compactions").textContent = String(report.compactions);
  const shared = report.shared_prefix_entries ? ` · shared prefix from the parent: ${report.shared_prefix_entries} entries, ` +
    `${fmt(report.shared_prefix_tokens)} tokens` : "";
  $("#budget-more").textContent =
    ` · tool definitions ${fmt(report.tool_definition_tokens)} tokens · usable input ${fmt(report.usable_input)}` + shared +
    (report.active_episodes.length ? ` · active episodes: ${report.active_episodes.join(", ")}` : "");
  renderItems(report);
  renderLegend(report.items.map((i) => i.reason));
}

export function renderItems(report) {
  const showOmitted = $("#show-omitted").checked;
  const rows = report.items.slice().sort((a, b) => a.seq - b.seq || a.id.localeCompare(b.id));
  const body = $("#items tbody");
  body.replaceChildren();
  let shown = 0;
  for (const item of rows) {
    if (item.projection === "omitted" && !showOmitted) continue;
    shown += 1;
    const reason = el("td", { class: "reason", title: describe(item.reason) },
      ...explain(item.reason).flatMap(({ code, entry }, i) => [
        i ? ";" : null, el("span", { class: entry ? "code" : "code unknown" }, code)]));
    const tr = el("tr", { class: `lc-${item.lifecycle} pj-${item.projection}`, "data-item-id": item.id },
      el("td", { class: "num" }, item.seq),
      el("td", { class: "mono" }, item.id),
      el("td", {}, el("span", { style: `color:${colorOf(item.kind)}` }, "■ "), item.kind),
      el("td", {}, el("span", { class: `state ${item.lifecycle}` }, item.lifecycle)),
      el("td", {}, item.projection),
      el("td", { class: "num" }, fmt(item.tokens)),
      reason,
      el("td", {}, item.episode || ""));
    if (item.id === state.openItemId) tr.classList.add("selected");
    body.append(tr);
  }
  $("#items-count").textContent = `${shown} shown of ${report.items.length}`;
}

// The side panel: the item's exact stored text next to the table (not below it).
export async function showItem(itemId) {
  state.openItemId = itemId;
  for (const tr of document.querySelectorAll("#items tbody tr")) tr.classList.toggle("selected", tr.dataset.itemId === itemId);
  const panel = $("#item-panel");
  panel.hidden = false;
  panel.dataset.itemId = itemId;
  $("#item-title").textContent = itemId;
  $("#item-meta").textContent = "loading…";
  $("#item-reason").replaceChildren();
  $("#item-text").textContent = "";
  const known = Object.values(state.reports).flatMap((r) => r.items).find((i) => i.id === itemId);
  try {
    const item = await api(`/v1/sessions/${state.sessionId}/items/${encodeURIComponent(itemId)}?max_chars=${ITEM_VIEW_CHARS}`);
    if (panel.dataset.itemId !== itemId) return;
    $("#item-meta").textContent = [
      `lane ${item.lane}`, `seq ${item.seq}`, item.kind, item.role, `${fmt(item.size_chars)} characters`,
      known ? `${known.lifecycle} · ${known.projection} · ${fmt(known.tokens)} tokens` : "not in the working set",
      item.truncated ? `first ${fmt(ITEM_VIEW_CHARS)} shown` : null,
    ].filter(Boolean).join(" · ");
    if (known) {
      $("#item-reason").replaceChildren(...explain(known.reason).map(({ code, entry }) =>
        el("li", {}, el("code", {}, code), " ", entry ? entry.meaning : "(not in the legend)")));
    }
    const calls = (item.tool_calls || []).map((c) => `\n→ ${(c.function || c).name}(${(c.function || c).arguments})`).join("");
    $("#item-text").textContent = `${item.text}${calls}`;
  } catch (error) {
    $("#item-meta").textContent = `${itemId}: ${error.message}`;
  }
}

export function closeItem() {
  state.openItemId = null;
  $("#item-panel").hidden = true;
  for (const tr of document.querySelectorAll("#items tbody tr.selected")) tr.classList.remove("selected");
}
