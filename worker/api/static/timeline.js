// The pressure timeline of one lane: working-set tokens of every request the lane planned
// (context.request events) against its budget, with compactions and condensations marked
// where they happened (between two requests: the working set before and after).
import { $, fmt, laneOf, pct, svg } from "./util.js";

const W = 900, H = 230, LEFT = 58, RIGHT = 12, TOP = 14, BOTTOM = 30;
const CONDENSATIONS = new Set(["context.compaction.llm", "context.compaction.explicit"]);

// What the lane's log says, in log order: samples (x = 1, 2, ...) and marks between them.
export function pressureSeries(events, lane) {
  const samples = [];
  const marks = [];
  for (const event of events) {
    if (laneOf(event) !== lane) continue;
    const p = event.payload || {};
    if (event.kind === "context.request") {
      samples.push({ x: samples.length + 1, n: event.n, ws: p.working_set_tokens || 0, request: p.request_tokens || 0,
                     budget: p.budget || 0, turn: p.turn, task: p.task_id });
    } else if (event.kind.startsWith("context.compaction.") && p.applied !== false) {
      marks.push({ x: samples.length + 0.5, n: event.n, kind: CONDENSATIONS.has(event.kind) ? "condensation" : "compaction",
                   mode: event.kind.slice("context.compaction.".length), before: p.tokens_before || 0,
                   after: p.tokens_after || 0, budget: p.budget || 0, archived: p.archived || 0 });
    }
  }
  return { samples, marks };
}

function label(x, y, text, anchor) {
  const node = svg("text", { x, y, class: "tick", "text-anchor": anchor });
  node.textContent = text;
  return node;
}

export function renderTimeline(events, lane, report) {
  const { samples, marks } = pressureSeries(events, lane);
  const chart = $("#timeline");
  chart.replaceChildren();
  const compactions = marks.filter((m) => m.kind === "compaction").length;
  const condensations = marks.length - compactions;
  const budgetNow = report ? report.budget : (samples.length ? samples[samples.length - 1].budget : 0);
  const peak = Math.max(0, ...samples.map((s) => s.ws), ...marks.map((m) => m.before));
  $("#timeline-summary").textContent = samples.length || marks.length
    ? `${lane}: ${samples.length} requests · peak ${fmt(peak)} tokens (${pct(peak, budgetNow)} of the budget) · ` +
      `${compactions} compactions · ${condensations} condensations`
    : `${lane}: no requests yet`;
  if (!samples.length && !marks.length) { chart.setAttribute("height", "0"); return; }

  const xMax = Math.max(samples.length, 1) + 0.5;
  const yMax = Math.max(budgetNow, peak, ...samples.map((s) => s.budget), 1) * 1.08;
  const x = (v) => LEFT + ((v - 0.5) / xMax) * (W - LEFT - RIGHT);
  const y = (v) => TOP + (1 - v / yMax) * (H - TOP - BOTTOM);
  chart.setAttribute("viewBox", `0 0 ${W} ${H}`);
  chart.setAttribute("height", String(H));

  // axes and ticks
  chart.append(svg("line", { x1: LEFT, y1: y(0), x2: W - RIGHT, y2: y(0), class: "axis" }));
  chart.append(svg("line", { x1: LEFT, y1: TOP, x2: LEFT, y2: y(0), class: "axis" }));
  for (const v of [0, yMax / 2, budgetNow].filter((v, i, all) => all.indexOf(v) === i)) {
    chart.append(label(LEFT - 6, y(v) + 4, fmt(Math.round(v)), "end"));
  }
  const step = Math.max(1, Math.ceil(samples.length / 10));
  for (let n = 1; n <= samples.length; n += step) {
    chart.append(label(x(n), H - 10, String(n), "middle"));
  }
  chart.append(label(W - RIGHT, H - 10, "request", "end"));

  // the budget (a step line when it changed) and the 60 % target compactions aim for
  const budgets = samples.length ? samples : [{ x: 1, budget: budgetNow }];
  let path = "";
  budgets.forEach((s, i) => {
    const left = i === 0 ? x(0.5) : x(s.x - 0.5);
    path += `${i === 0 ? "M" : "L"}${left},${y(s.budget)} L${x(s.x + 0.5)},${y(s.budget)} `;
  });
  chart.append(svg("path", { d: path, class: "budget", "data-budget": budgetNow }, `budget ${fmt(budgetNow)} tokens`));
  chart.append(svg("line", { x1: x(0.5), y1: y(budgetNow * 0.6), x2: x(xMax), y2: y(budgetNow * 0.6), class: "target" },
    "compaction target: 60 % of the budget"));

  // compactions and condensations: a bar from the working set before to after
  for (const m of marks) {
    const title = `${m.kind} (${m.mode}), event #${m.n}: ${fmt(m.before)} → ${fmt(m.after)} tokens, ${m.archived} archived`;
    const g = svg("g", { class: `mark ${m.kind}`, "data-kind": m.kind, "data-n": m.n }, title);
    g.append(svg("line", { x1: x(m.x), y1: TOP, x2: x(m.x), y2: y(0), class: "mark-line" }));
    g.append(svg("line", { x1: x(m.x), y1: y(m.before), x2: x(m.x), y2: y(m.after), class: "mark-drop" }));
    g.append(svg("path", { d: `M${x(m.x) - 5},${y(m.after) - 7} L${x(m.x) + 5},${y(m.after) - 7} L${x(m.x)},${y(m.after)} z`,
                           class: "mark-tip" }));
    chart.append(g);
  }

  // the working set and the request sent, per request
  if (samples.length) {
    chart.append(svg("polyline", { points: samples.map((s) => `${x(s.x)},${y(s.request)}`).join(" "), class: "request-line" }));
    chart.append(svg("polyline", { points: samples.map((s) => `${x(s.x)},${y(s.ws)}`).join(" "), class: "ws-line" }));
  }
  for (const s of samples) {
    const title = `request ${s.x}${s.task ? ` (${s.task}${s.turn !== null && s.turn !== undefined ? `, turn ${s.turn + 1}` : ""})` : ""}, ` +
      `event #${s.n}: working set ${fmt(s.ws)} tokens, request ${fmt(s.request)}, budget ${fmt(s.budget)} (${pct(s.ws, s.budget)})`;
    chart.append(svg("circle", { cx: x(s.x), cy: y(s.ws), r: samples.length > 80 ? 1.8 : 3, class: "sample",
                                 "data-x": s.x, "data-tokens": s.ws, "data-budget": s.budget }, title));
  }
}
