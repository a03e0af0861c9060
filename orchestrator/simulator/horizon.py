"""A fixed horizon's figures (``simulate --horizon``): cycles, visit intervals, targets, goodput.

The train cycles as the live one does: a completed cycle is followed by a rest until a host needs
a visit (``planning.resting``); every completed cycle is reported with its makespan, the hosts it
visited (drained) and those it checked in place (nothing pending), and the cycle still running at
the horizon as incomplete (none while the train rests). A host's visit interval is the
fleet time between two of its visits (returned to service by the train); ``open_max`` is the
longest any host has gone without one at the horizon (counted from the start for a host never
visited), and ``max`` the larger of the two, so a host the train left behind shows.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from orchestrator.contracts.models import GPUS_PER_HOST
from orchestrator.fleet.cluster_sim import ClusterSim
from orchestrator.planning.cost import rounded
from orchestrator.simulator.config import SimConfig
from orchestrator.simulator.goodput import Goodput


def _q(xs: list[float], p: float) -> float:
    return round(xs[min(len(xs) - 1, int(p * len(xs)))], 3)


@dataclass
class HorizonLog:
    """Cycles, visits, targets and maintenance work of one fixed-horizon run."""

    started: float
    base_targets: dict[str, str]
    cycles: list[dict[str, Any]] = field(default_factory=list)
    last_visit: dict[str, float] = field(default_factory=dict)
    intervals: list[float] = field(default_factory=list)
    cycle_visited: set[str] = field(default_factory=set)
    cycle_checked: set[str] = field(default_factory=set)
    checked_total: int = 0
    work_host_hours: float = 0.0
    target_changes: list[dict[str, Any]] = field(default_factory=list)

    def targets(self, k: int) -> dict[str, str]:
        """The ``k``-th new version of each targeted component: ``<old>-r<k>``."""
        return {c: f"{v}-r{k}" for c, v in self.base_targets.items()}

    def visited(self, hosts: list[str], now: float) -> None:
        for name in hosts:
            last = self.last_visit.get(name)
            if last is not None:
                self.intervals.append(now - last)
            self.last_visit[name] = now
            self.cycle_visited.add(name)

    def checked(self, hosts: list[str], now: float) -> None:
        """Hosts the cycle reached with nothing pending: visited in place, not drained."""
        self.checked_total += len(hosts)
        self.cycle_checked.update(hosts)
        for name in hosts:
            self.last_visit[name] = now

    def cycle_done(self, now: float, started: float, target: float | None) -> None:
        span = now - started
        row: dict[str, Any] = {
            "cycle": len(self.cycles) + 1,
            "started_hours": round(started, 3),
            "makespan_hours": round(span, 3),
            "hosts_visited": len(self.cycle_visited),
            "hosts_checked": len(self.cycle_checked),
            "complete": True,
        }
        if target is not None:
            row["met_target"] = span <= target
        self.cycles.append(row)
        self.cycle_visited, self.cycle_checked = set(), set()

    def visit_intervals(self, sim: ClusterSim, target: float | None) -> dict[str, Any]:
        now = sim.now
        opened = [now - self.last_visit.get(n, self.started) for n in sim.order]
        xs = sorted(self.intervals)
        out: dict[str, Any] = {"intervals": len(xs)}
        if xs:
            out.update(p50=_q(xs, 0.5), p95=_q(xs, 0.95), closed_max=round(xs[-1], 3))
        else:
            out.update(p50=None, p95=None, closed_max=None)
        out["open_max"] = round(max(opened), 3) if opened else None
        out["max"] = round(max([*xs, *opened]), 3) if opened or xs else None
        if target is not None:
            out["cycle_target_hours"] = target
            out["within_target_share"] = (
                round(sum(1 for x in xs if x <= target) / len(xs), 4) if xs else None
            )
        return out

    def _cycle_in_progress(self, number: int, started: float) -> dict[str, Any]:
        """The cycle the horizon cut short, as the report lists it."""
        return {
            "cycle": number,
            "started_hours": round(started, 3),
            "makespan_hours": None,
            "hosts_visited": len(self.cycle_visited),
            "hosts_checked": len(self.cycle_checked),
            "complete": False,
        }

    def report(
        self,
        sim: ClusterSim,
        cfg: SimConfig,
        g: Goodput,
        cycle_started: float,
        none: bool,
        resting: bool = False,
    ) -> dict[str, Any]:
        """The fields a fixed-horizon run appends to its JSON (costs come from ``yardstick``)."""
        assert cfg.horizon_hours is not None
        cycles = list(self.cycles)
        if not none and not resting:
            cycles.append(self._cycle_in_progress(len(cycles) + 1, cycle_started))
        target = cfg.cycle_target_hours
        done = [c for c in cycles if c["complete"]]
        out: dict[str, Any] = {
            "horizon_hours": cfg.horizon_hours,
            "target_every_hours": cfg.target_every_hours,
            "cycle_every_hours": cfg.cycle_every_hours,
            "restart_base_minutes": round(cfg.restart_base_hours * 60.0, 4),
            "restart_per_host_minutes": round(cfg.restart_per_host_hours * 60.0, 6),
            "goodput_gpu_hours": round(g.goodput_gpu_hours(), 1),
            "maintenance_work_gpu_hours": round(self.work_host_hours * GPUS_PER_HOST, 1),
            "hidden_in_idle_share": round(g.hidden / g.work, 4) if g.work > 0 else None,
            "cycles": cycles,
            "cycles_completed": len(done),
            "hosts_checked": self.checked_total,
            "resting_at_horizon": resting,
            "cycles_meeting_target": (
                sum(1 for c in done if c.get("met_target"))
                if target is not None and not none
                else None
            ),
            "visit_interval_hours": self.visit_intervals(sim, target) if not none else None,
            "ettr": g.ettr(sim.now),
            "mttf_hours": g.mttf_hours(),
            "failure_interruptions": g.failure_interruptions,
            "maintenance_interruptions": g.maint_interruptions,
            "restart_gpu_hours": round(g.restart_spent, 1),
            "lost_work_all_gpu_hours": round(g.lost_all, 1),
            "final_targets": dict(cfg.targets) if not none else None,
            "checkpoint_write_minutes": round(cfg.checkpoint_write_hours * 60.0, 4),
            "checkpoint_writes_gpu_hours": round(g.writes, 1),
            # What maintenance cost the jobs, part by part, measured in this run (``yardstick``
            # adds the baseline's goodput and the difference beside it).
            "maintenance_cost_gpu_hours": round(g.cost.total(), 1),
            "cost_parts": rounded(g.cost.parts()),
        }
        if cfg.pin_job is not None:
            out["pinned_job"] = g.pinned_report(*cfg.pin_job, cfg.horizon_hours)
        return out
