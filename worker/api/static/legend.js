// The legend of reason codes, from the one table the engine's codes are checked against
// (reasons.json, tests/ui/test_reason_legend.py). An item's reason may chain codes with ";".
import { $, el } from "./util.js";

let entries = [];

function matcher(code) {
  // {name} is a value the engine fills in; everything else is literal
  const parts = code.split(/\{[^{}]*\}/).map((p) => p.replace(/[.*+?^$()|[\]\\]/g, "\\$&"));
  return new RegExp(`^${parts.join(".+?")}$`);
}

export async function loadLegend() {
  const response = await fetch("/ui/static/reasons.json", { cache: "no-cache" });
  const table = await response.json();
  entries = table.codes.map((entry) => ({
    ...entry, regex: matcher(entry.code), literal: entry.code.replace(/\{[^{}]*\}/g, "").length,
  }));
  $("#legend-about").textContent = table.about;
  renderLegend(new Set());
}

// The legend entry of one code (the most specific when several match: pinned:by-caller over pinned:{kind}).
export function entryOf(code) {
  let best = null;
  for (const entry of entries) {
    if (entry.regex.test(code) && (!best || entry.literal > best.literal)) best = entry;
  }
  return best;
}

export function explain(reason) {
  return String(reason || "").split(";").filter(Boolean).map((code) => ({ code, entry: entryOf(code) }));
}

export function describe(reason) {
  return explain(reason).map(({ code, entry }) => `${code}: ${entry ? entry.meaning : "(not in the legend)"}`).join("\n");
}

// Every code, those in use in the shown working set marked (with how many items carry them).
export function renderLegend(reasons) {
  const used = new Map();
  for (const reason of reasons) {
    for (const { entry } of explain(reason)) if (entry) used.set(entry.code, (used.get(entry.code) || 0) + 1);
  }
  const body = $("#legend tbody");
  body.replaceChildren();
  for (const entry of entries) {
    const count = used.get(entry.code) || 0;
    body.append(el("tr", { class: count ? "in-use" : "", "data-code": entry.code },
      el("td", { class: "mono" }, entry.code),
      el("td", {}, entry.group),
      el("td", { class: "num" }, count ? String(count) : ""),
      el("td", { class: "meaning" }, entry.meaning)));
  }
}
