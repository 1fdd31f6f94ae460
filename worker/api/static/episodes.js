// The main lane's episodes: a list (active first) and their dependency graph.
import { $, el, fmt, svg } from "./util.js";

const WIDTH = 150;

export function renderEpisodes(list) {
  const ul = $("#episodes");
  ul.replaceChildren();
  const graph = $("#episode-graph");
  graph.replaceChildren();
  $("#episodes-empty").hidden = list.episodes.length > 0;
  if (!list.episodes.length) { graph.setAttribute("height", "0"); return; }
  const pos = {};
  list.episodes.forEach((ep, index) => {
    pos[ep.id] = { x: 10 + index * WIDTH, y: ep.kind === "action" ? 70 : 20 };
    ul.append(el("li", { "data-episode-id": ep.id },
      el("b", {}, ep.id), ` ${ep.kind || ""} · ${ep.status}`,
      ep.goal ? ` · goal: ${ep.goal}` : "", ep.conclusion ? ` · conclusion: ${ep.conclusion}` : "",
      ep.depends_on.length ? ` · depends on ${ep.depends_on.join(", ")}` : "",
      ` · ${ep.items} items, ${fmt(ep.tokens)} tokens`));
  });
  const defs = svg("defs");
  const marker = svg("marker", { id: "arrow", markerWidth: 8, markerHeight: 8, refX: 8, refY: 4, orient: "auto" });
  marker.append(svg("path", { d: "M0,0 L8,4 L0,8 z", fill: "#94a3b8" }));
  defs.append(marker);
  graph.append(defs);
  for (const ep of list.episodes) {
    for (const dep of ep.depends_on) {
      if (!pos[dep]) continue;
      const a = pos[dep], b = pos[ep.id];
      graph.append(svg("line", { x1: a.x + 120, y1: a.y + 12, x2: b.x, y2: b.y + 12, stroke: "#94a3b8", "marker-end": "url(#arrow)" }));
    }
  }
  for (const ep of list.episodes) {
    const p = pos[ep.id];
    const fill = ep.status === "active" ? "#dcfce7" : ep.status === "archived" ? "#f3f4f6" : "#e0f2fe";
    const text = svg("text", { x: p.x + 6, y: p.y + 16 });
    text.textContent = ep.id.length > 17 ? `${ep.id.slice(0, 16)}…` : ep.id;
    graph.append(svg("rect", { x: p.x, y: p.y, width: 120, height: 24, rx: 5, fill, stroke: "#94a3b8" },
      `${ep.id} (${ep.kind || "?"}, ${ep.status})`), text);
  }
  graph.setAttribute("height", "104");
  graph.setAttribute("viewBox", `0 0 ${Math.max(300, 20 + list.episodes.length * WIDTH)} 104`);
}
