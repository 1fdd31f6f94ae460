"""``lanes replay --csv`` and ``--plot``: the figures of one or more replays, per budget and policy.

One CSV row per (budget, policy) with every figure of the ``--json`` object; the plot has
two panels against the budget, cost units and peak request (with the budget itself as the
line no request may cross). matplotlib is imported only for ``--plot`` (the ``plot`` extra).
"""

from __future__ import annotations

import csv
from pathlib import Path

from worker.replay.simulator import ReplayReport

COLUMNS = ("budget", "policy", "files", "steps", "input_tokens", "cached_input_tokens", "cost_units",
           "peak_input_tokens", "over_budget_steps", "unfit_steps", "compactions", "plan_ms_p50", "plan_ms_p99",
           "lost_items")


def rows(reports: list[ReplayReport]) -> list[dict]:
    out = []
    for report in reports:
        data = report.as_dict()
        for name, figures in data["policies"].items():
            row = {"budget": data["budget"], "policy": name, "files": data["files"], "steps": data["steps"], **figures}
            out.append({column: row.get(column) for column in COLUMNS})
    return out


def write_csv(reports: list[ReplayReport], path: Path) -> None:
    with open(path, "w", newline="", encoding="utf-8") as handle:
        writer = csv.DictWriter(handle, fieldnames=COLUMNS)
        writer.writeheader()
        writer.writerows(rows(reports))


class PlotUnavailable(Exception):
    pass


def write_plot(reports: list[ReplayReport], path: Path) -> None:
    try:
        import matplotlib

        matplotlib.use("Agg")  # files only: no display needed
        import matplotlib.pyplot as plt
    except ImportError:
        raise PlotUnavailable("--plot needs matplotlib: pip install 'context-lanes[plot]'") from None
    table = rows(reports)
    budgets = sorted({row["budget"] for row in table})
    policies = list(dict.fromkeys(row["policy"] for row in table))
    fig, (cost, peak) = plt.subplots(1, 2, figsize=(11, 4.5), constrained_layout=True)
    for policy in policies:
        mine = sorted((row for row in table if row["policy"] == policy), key=lambda row: row["budget"])
        xs = [row["budget"] for row in mine]
        cost.plot(xs, [row["cost_units"] for row in mine], marker="o", label=policy)
        peak.plot(xs, [row["peak_input_tokens"] for row in mine], marker="o", label=policy)
    peak.plot(budgets, budgets, linestyle="--", color="grey", label="budget")
    files, steps = table[0]["files"], table[0]["steps"]
    cost.set(title=f"cost units ({files} files, {steps:,} model calls)", xlabel="budget (tokens)",
             ylabel="uncached input + 0.1 × cached")
    peak.set(title="peak request", xlabel="budget (tokens)", ylabel="input tokens")
    for axis in (cost, peak):
        axis.set_xticks(budgets)
        axis.grid(alpha=0.3)
        axis.legend()
    fig.savefig(path, dpi=110)
    plt.close(fig)
