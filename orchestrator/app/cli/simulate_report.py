"""How ``trainctl simulate`` prints a run, a fleet-wide run and a sweep for people (rich tables).

Under ``--json`` none of this is used: the command emits the objects these functions render.
"""

from __future__ import annotations

from typing import Any

from rich.console import Console
from rich.table import Table

#: Columns a console not on a terminal (a pipe, a file) renders: every table whole, none cut
#: to rich's default of 80.
PIPE_WIDTH = 1_000

_COLUMNS = (
    ("value", "setting"),
    ("domain", "effective_domain_size"),
    ("visited", "hosts_visited"),
    ("quar.", "hosts_quarantined"),
    ("span h", "makespan_hours"),
    ("/bound", "makespan_over_lower_bound"),
    ("/after out.", "makespan_over_lower_bound_after_outages"),
    ("interr.", "job_interruptions"),
    ("lost GPU-h", "lost_gpu_hours"),
    ("viol.", "budget_violations"),
    ("util.", "utilisation"),
    ("wall s", "wall_seconds"),
)

#: A fixed horizon's sweep adds what each setting cost users: the maintenance cost (the sum of
#: its parts: held capacity, lost work, restarts) and its restart part.
_HORIZON_COLUMNS = (
    ("rank", "rank"),
    ("maintenance cost GPU-h", "maintenance_cost_gpu_hours"),
    ("restart GPU-h", "cost_parts.restart"),
)


def _console() -> Console:
    """A console for the command's output: the terminal's width on a terminal, and wide enough
    for every table when piped (rich would otherwise cut them to 80 columns)."""
    con = Console()
    return con if con.is_terminal else Console(width=PIPE_WIDTH)


def _notes(rows: list[dict[str, Any]]) -> list[str]:
    """Each distinct ``domain_size_note`` of the rows, in order."""
    return list(
        dict.fromkeys(str(r["domain_size_note"]) for r in rows if r.get("domain_size_note"))
    )


def print_run(o: dict[str, Any]) -> None:
    con = _console()
    done = "complete" if o["complete"] else "NOT complete"
    con.print(
        f"[bold]{o['policy']}[/] on {o['preset']}/{o['cluster']}: domain {o['domain_size']}"
        f"{_capped(o)}, "
        f"budget {o['budget_hosts']} hosts, seed {o['seed']}: cycle {done}"
    )
    t = Table("metric", "value")
    for key in (
        "hosts_total",
        "hosts_visited",
        "hosts_quarantined",
        "hosts_in_repair",
        "makespan_hours",
        "lower_bound_hours",
        "makespan_over_lower_bound",
        "lower_bound_after_outages_hours",
        "makespan_over_lower_bound_after_outages",
        "job_interruptions",
        "lost_gpu_hours",
        "lost_work_gpu_hours",
        "drain_wait_host_hours",
        "outage_budget_hosts_mean",
        "budget_violations",
        "max_out_of_service",
        "piggybacked_hosts",
        "released_hosts",
        "utilisation",
        "wall_seconds",
    ):
        t.add_row(key, _cell(key, o.get(key)) if o.get(key) is None else str(o[key]))
    for key in ("cycle_target_hours", "cycle_target_met", "behind_target_plans"):
        if key in o:  # only with --cycle-target
            t.add_row(key, str(o[key]))
    for key in HORIZON_ROWS:
        if key in o:  # only with --horizon
            t.add_row(key, str(o[key]))
    if "baseline" in o:
        t.add_row("baseline (none) utilisation", str(o["baseline"]["utilisation"]))
    con.print(t)
    for c in o.get("cycles") or []:
        span = c["makespan_hours"]
        took = "running" if span is None else f"{span:.1f} h"
        con.print(f"cycle {c['cycle']}: {took}, {c['hosts_visited']} hosts visited")
    if o.get("max_out_of_service_note"):
        con.print(f"max_out_of_service: {o['max_out_of_service_note']}")
    for note in _notes([o]):
        con.print(f"domain_size: {note}")


#: A fixed horizon's rows in the text output (``--horizon``).
HORIZON_ROWS = (
    "horizon_hours",
    "goodput_gpu_hours",
    "maintenance_cost_gpu_hours",
    "cost_parts",
    "baseline_difference_gpu_hours",
    "residual_gpu_hours",
    "maintenance_work_gpu_hours",
    "cost_over_work",
    "hidden_in_idle_share",
    "cycles_completed",
    "cycles_meeting_target",
    "visit_interval_hours",
    "ettr",
    "pinned_job",
)


def _capped(o: dict[str, Any]) -> str:
    """`` (capped at N by the budget)`` when the budget runs a smaller domain than asked."""
    eff = o.get("effective_domain_size")
    if eff is None or eff == o.get("domain_size"):
        return ""
    return f" (capped at {eff} by the budget)"


def print_fleet(o: dict[str, Any]) -> None:
    con = _console()
    title = f"{o['policy']} on every cluster of {o['preset']}"
    t = Table("cluster", *(c[0] for c in _COLUMNS[1:]), title=title)
    for row in [*o["clusters"], _fleet_row(o)]:
        t.add_row(str(row.get("cluster")), *(_cell(k, row.get(k)) for _, k in _COLUMNS[1:]))
    con.print(t)
    for note in _notes(o["clusters"]):
        con.print(f"domain_size: {note}")


def _fleet_row(o: dict[str, Any]) -> dict[str, Any]:
    """The totals as the table's ``fleet`` row; its domain is the clusters' when they agree."""
    domains = {row.get("effective_domain_size") for row in o["clusters"]}
    domain = domains.pop() if len(domains) == 1 else "-"
    return {**o["totals"], "cluster": "fleet", "effective_domain_size": domain}


def _get(row: dict[str, Any], key: str) -> Any:
    """``row[key]``, a dotted key reading a nested object (``cost_parts.restart``)."""
    head, _, rest = key.partition(".")
    v = row.get(head)
    return _get(v, rest) if rest and isinstance(v, dict) else (None if rest else v)


def _cell(key: str, v: object) -> str:
    if v is None:  # a makespan (and its ratios) only exists for a cycle that ended
        return "incomplete" if key.startswith("makespan") else "-"
    if not isinstance(v, float):
        return str(v)
    if key == "utilisation":
        return f"{v:.1%}"
    return f"{v:.2f}" if key.startswith("makespan_over") else f"{v:,.1f}"


def print_sweep(o: dict[str, Any]) -> None:
    con = _console()
    title = f"sweep of {o['sweep']} on {o['scope']}"
    ranking = o.get("ranking")
    columns = _COLUMNS + (_HORIZON_COLUMNS if ranking else ())
    rank = {v: i + 1 for i, v in enumerate(ranking or [])}
    if o.get("clusters"):  # every cluster of a fleet: its rows, then the fleet's totals
        t = Table(columns[0][0], "cluster", *(c[0] for c in columns[1:]), title=title)
        for run in o["runs"]:
            for row in [*run["clusters"], _fleet_row(run)]:
                if row["cluster"] == "fleet":
                    row = {**row, "rank": rank.get(run["setting"])}
                cells = (_cell(k, _get(row, k)) for _, k in columns[1:])
                t.add_row(run["setting"], str(row.get("cluster")), *cells)
            t.add_section()
    else:
        t = Table(*(c[0] for c in columns), title=title)
        for row in o["runs"]:
            row = {**row, "rank": rank.get(row["setting"])}
            t.add_row(*(_cell(k, _get(row, k)) for _, k in columns))
    con.print(t)
    if ranking:
        lost = {
            r["setting"]: (r.get("totals") or r)["maintenance_cost_gpu_hours"] for r in o["runs"]
        }
        order = ", ".join(f"{o['sweep']}={v} ({lost[v]:,.1f} GPU-h)" for v in ranking)
        con.print(f"ranked by goodput lost to maintenance, least first: {order}")
    for note in o.get("notes") or []:
        con.print(f"domain_size: {note}")
    if o.get("plot"):
        con.print(f"plot written to {o['plot']}")
