// The lanes of a session as a tree: the main lane, and under it the subagent lanes it
// started (a subagent starts none of its own), each with its state, working set and events.
import { $, el, fmt, laneOf, MAIN_LANE, pct, state } from "./util.js";

let onSelect = () => {};

export function initLanes(select) {
  onSelect = select;
  $("#lanes-tree").addEventListener("click", (click) => {
    const node = click.target.closest("[data-lane]");
    if (node) onSelect(node.dataset.lane);
  });
}

function node(lane, meta, report, events) {
  const selected = lane === state.lane;
  const fill = report ? Math.min(100, (100 * report.working_set_tokens) / Math.max(report.budget, 1)) : 0;
  return el("div", { class: `lane-node${selected ? " selected" : ""}`, "data-lane": lane, role: "button",
                     title: `show lane ${lane}` },
    el("div", { class: "lane-head" }, el("span", { class: "lane-name" }, lane), " ",
      meta.state ? el("span", { class: `tag state-${meta.state}` }, meta.state) : null),
    el("div", { class: "mini-bar" }, el("div", { style: `width:${fill}%` })),
    el("div", { class: "lane-facts dim", "data-role": "facts" },
      report ? `${fmt(report.working_set_tokens)} / ${fmt(report.budget)} tokens (${pct(report.working_set_tokens, report.budget)})`
        + ` · ${report.items.length} items` : "working set not loaded",
      ` · ${fmt(events)} events`,
      meta.detail ? el("div", {}, meta.detail) : null));
}

export function renderLanes() {
  const counts = {};
  for (const event of state.events) counts[laneOf(event)] = (counts[laneOf(event)] || 0) + 1;
  const tree = $("#lanes-tree");
  const mainState = state.info && state.info.workflow ? state.info.workflow.status.toLowerCase() : "";
  const root = el("li", { "data-tree-lane": MAIN_LANE },
    node(MAIN_LANE, { state: mainState, detail: state.children.length ? `${state.children.length} subagent lanes` : "" },
      state.reports[MAIN_LANE], counts[MAIN_LANE] || 0));
  if (state.children.length) {
    const list = el("ul", {});
    for (const child of state.children) {
      const detail = [child.task_id ? `from ${child.task_id}` : "from the API",
        child.handoff_item_id ? `handoff ${child.handoff_item_id}` : null, child.reason || null].filter(Boolean).join(" · ");
      list.append(el("li", { "data-tree-lane": child.lane },
        node(child.lane, { state: child.state, detail }, state.reports[child.lane], counts[child.lane] || 0)));
    }
    root.append(list);
  }
  tree.replaceChildren(root);
}
