"""``trainctl demo --campaign``: show a campaign stage by stage on stderr, then its summary.

The demo itself is ``orchestrator.app.demo_campaign``; this module prints a line whenever a stage
or a cluster changes state (so a person sees the canary, its bake, the first cluster and the
rest go by) and exits 1 unless the campaign succeeded and the fleet's audit is clean.
"""

from __future__ import annotations

import asyncio
from typing import Any

import click
from rich.console import Console

from orchestrator.app.cli.common import emit, fail
from orchestrator.contracts.campaign_types import CampaignStatus
from orchestrator.contracts.ui_text import duration, plural


class _Stages:
    """One line on stderr per change of a stage's or a cluster's state."""

    def __init__(self) -> None:
        self.console = Console(stderr=True)
        self.seen: dict[str, str] = {}

    def ui(self, url: str) -> None:
        self.console.print(f"Temporal UI: [link={url}]{url}[/link]")

    def status(self, status: CampaignStatus) -> None:
        for s in status.stages:
            clusters = ", ".join(f"{c} {cs.state}" for c, cs in sorted(s.clusters.items()))
            line = f"{s.state} ({clusters})" if clusters else s.state
            if self.seen.get(s.name) != line:
                self.seen[s.name] = line
                bake = (
                    f", bake {duration(s.bake_remaining_hours)} left"
                    if s.bake_remaining_hours
                    else ""
                )
                self.console.print(
                    f"[bold]{s.name}[/bold]: {line}; {s.hosts_changed}/{s.hosts_planned} hosts "
                    f"changed, {s.failures} failed{bake}"
                )


def _print(o: dict[str, Any]) -> None:
    click.echo(
        f"{o['campaign_id']} on {o['preset']}: {o['state']} ({o['reason']}); "
        f"{plural(o['hosts_changed'], 'host')} changed, {o['hosts_quarantined']} quarantined, "
        f"{o['hosts_rolled_back']} rolled back; audit {'ok' if o['audit_ok'] else 'FAILED'}; "
        f"{duration(o['wall_seconds'] / 3600)} of wall time."
    )
    for s in o["stages"]:
        limit = s["failure_limit"]
        click.echo(
            f"  {s['name']}: {s['state']} on {', '.join(s['clusters'])}: "
            f"{s['hosts_changed']} changed, {s['failures']} failed"
            + (" (no limit yet)" if limit is None else f" of at most {limit}")
        )
    for name, c in o["clusters"].items():
        click.echo(
            f"  {name}: {c['on_target']} in service on the new build, {c['off_target']} not, "
            f"{c['down']} quarantined or in repair"
        )


def run(preset: str, speed: float, seed: int, port: int, ui_port: int, as_json: bool) -> None:
    from orchestrator.app.demo_campaign import run_campaign_demo

    view = _Stages()
    try:
        out = asyncio.run(
            run_campaign_demo(
                preset, speed, seed, port, ui_port, on_ui=view.ui, on_status=view.status
            )
        )
    except KeyboardInterrupt:
        fail("interrupted")
    emit(out, as_json, _print)
    if out["state"] != "succeeded":
        fail(f"the campaign {out['state']}: {out['reason']}")
    if not out["audit_ok"]:
        fail("the fleet's audit found broken invariants (run `trainctl audit`)")
