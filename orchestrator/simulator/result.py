"""What one simulated campaign cost, and the capacity bounds it is judged against."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from orchestrator.contracts.backend import ClusterBackend
from orchestrator.contracts.updates import maintenance_hours, pending_components
from orchestrator.planning.spec_fit import fit_domain


def maintenance_work_hours(b: ClusterBackend, targets: Mapping[str, str]) -> float:
    """Host-hours of maintenance the campaign needs: each host's pending updates plus verify."""
    return sum(
        maintenance_hours(pending_components(b.host(n).versions, targets)) for n in b.host_names()
    )


def lower_bound_hours(work_host_hours: float, domain_size: int, budget_hosts: int) -> float:
    """The capacity bound on the makespan: ``work_host_hours / min(domain_size, budget_hosts)``.

    ``work_host_hours`` is the sum over hosts of ``dynamics.maintenance_hours`` of the host's
    pending components (install, one reboot, verification). No policy can have more than
    ``min(domain_size, budget_hosts)`` hosts in maintenance at once, so none can finish sooner,
    even with no job to drain, no failure and no host lost to repair or quarantine eating the
    budget. It ignores that hosts come in whole rounds, so a run with no jobs reaches it within one
    maintenance duration (exactly when the hosts divide evenly into rounds).
    """
    return work_host_hours / max(1, min(domain_size, budget_hosts))


def lower_bound_after_outages_hours(
    work_host_hours: float, domain_size: int, budget_hosts: int, outage_hosts_mean: float
) -> float:
    """The capacity bound of one run once the fleet's own outages have taken their share of the
    budget: ``work_host_hours / min(domain_size, budget_hosts - outage_hosts_mean)``.

    The budget counts hosts out of service for any reason, not only this train's maintenance:
    hosts in repair after a failure, hosts quarantined (in triage, then in repair) and repaired
    hosts waiting for their updates take a share of it that no policy can use.
    ``outage_hosts_mean`` is that share averaged over the run (``outage_budget_hosts_mean``:
    the mean of ``min(budget, hosts out for other reasons)``). While the budget holds, the hosts
    in maintenance number at most ``min(domain_size, budget_hosts - outage(t))`` at every
    instant, a concave function of the outage, so over a run of length T the work done is at
    most ``T * min(domain_size, budget_hosts - outage_hosts_mean)`` (Jensen): no policy meeting
    the same outages can finish sooner (``work_host_hours`` is the campaign's work at its start;
    visiting repaired hosts again only adds to it). It depends on the run (the outages a
    campaign meets grow with its length and with the quarantines its own visits cause), so it
    is reported next to ``lower_bound_hours``, the issue's fixed bound, never instead of it; it
    equals that bound when nothing else is out of service.
    """
    room = min(float(domain_size), budget_hosts - outage_hosts_mean)
    return work_host_hours / max(1.0, room)


@dataclass
class SimResult:
    """What one campaign cost; ``to_json`` is the CLI's JSON object.

    The cycle is complete once every host was visited once: returned to service after passing
    verification (``hosts_visited``), quarantined by the train, or held by the repair shop when
    nothing else is left (repair gives it back on every recorded target; ``hosts_quarantined``
    counts both, ``hosts_in_repair`` the latter). Quarantine is not a visit: a quarantined host
    that repair gives back during the cycle is due again, and counts as visited once the train
    has verified it.
    ``makespan_hours`` is the fleet time from the campaign's start to that moment (None if
    ``days`` ran out first); ``lower_bound_hours`` is the issue's bound and
    ``lower_bound_after_outages_hours`` the same work over the budget the fleet's own outages
    left (see the functions of those names).
    ``job_interruptions`` counts ``job_interrupted`` events caused by maintenance (cause
    ``maintenance:...``); ``lost_gpu_hours`` = work those interruptions lost since the last
    checkpoint (``lost_work_gpu_hours``). ``budget_violations``
    counts instants at which the train held more hosts than the budget, or a cordon of the train
    left more hosts out of service than the budget allows (failures landing on hosts already out
    may push the total above it without the train's doing: ``max_out_of_service`` shows it).
    """

    policy: str
    preset: str
    cluster: str
    seed: int
    days: float
    domain_size: int
    budget_hosts: int
    max_wait_hours: float
    hosts_total: int
    hosts_visited: int
    hosts_quarantined: int
    hosts_in_repair: int
    complete: bool
    makespan_hours: float | None
    lower_bound_hours: float
    """The issue's capacity bound: maintenance work / hosts the budget lets out at once."""
    outage_budget_hosts_mean: float
    """Mean hosts of the budget taken by hosts down for other reasons (repair, quarantine)."""
    lower_bound_after_outages_hours: float
    """Work / (hosts the budget lets out at once - ``outage_budget_hosts_mean``)."""
    job_interruptions: int
    lost_work_gpu_hours: float
    drain_wait_host_hours: float
    budget_violations: int
    max_out_of_service: int
    simulated_hours: float
    wall_seconds: float
    planner_calls: int
    halted: str | None = None
    """Why the train's halting rule stopped the campaign (a bad build by default, or
    ``halt_after_failures`` in a row or ``halt_failure_rate`` when given), as the live train
    would have halted; None if it never tripped."""
    domains: int = 0
    """Maintenance domains run (each a ``DomainMaintenance`` of the live train)."""
    series: list[tuple[float, int, int]] | None = None
    max_unavailable_hosts: int = 0
    """The floor: hosts out of service for any reason the budget allows (``budget_hosts`` is
    the maintenance budget, what planned work may hold; the gap is the failure buffer)."""
    maintenance_work_host_hours: float = 0.0
    """The campaign's work at its start (``lower_bound_hours`` = this / ``budget_hosts``)."""
    piggybacked_hosts: int = 0
    """Hosts the fleet cordoned for the train as a job's end or failure freed them."""
    released_hosts: int = 0
    """Hosts a drain handed back untouched because their job said "not now" (job-aware:
    ``DrainTracker.release``); each is taken again later, or piggybacked, in the cycle."""
    visit_interval_hours: dict[str, float] | None = None
    """Hours from the cycle's start to each host's visit: p50, p90, p99, max (see
    ``visit_interval_summary``)."""
    utilisation: float = 0.0
    """Mean fraction of the cluster's hosts running a job over the run: what maintenance and
    the scheduler's fit (big jobs wait for room) left of its 0.9 target. A policy that cut
    interruptions by keeping jobs waiting would show it here."""
    cycle_target_hours: float | None = None
    """The run's ``--cycle-target`` (a train spec's ``cycle_target``); None: none given."""
    cycle_target_met: bool | None = None
    """Whether the cycle completed within ``cycle_target_hours`` (None: no target)."""
    behind_target_plans: int | None = None
    """Plans made while the cycle was projected past its target, when the train evicts sooner
    (``train_plan.BEHIND_TARGET_EVICT_MIN_FILL``); None: no target."""
    horizon_report: dict[str, Any] | None = None
    """A fixed horizon's figures (``simulate --horizon``: ``horizon.HorizonLog.report``, costs
    against the baseline added by ``yardstick``), appended last to the JSON; None otherwise."""

    @property
    def lost_gpu_hours(self) -> float:
        return self.lost_work_gpu_hours

    @property
    def makespan_ratio(self) -> float | None:
        """Makespan over the issue's ``lower_bound_hours``."""
        if self.makespan_hours is None or self.lower_bound_hours <= 0:
            return None
        return self.makespan_hours / self.lower_bound_hours

    @property
    def makespan_ratio_after_outages(self) -> float | None:
        """Makespan over ``lower_bound_after_outages_hours``."""
        if self.makespan_hours is None or self.lower_bound_after_outages_hours <= 0:
            return None
        return self.makespan_hours / self.lower_bound_after_outages_hours

    @property
    def effective_domain_size(self) -> int:
        """Hosts the train may really have in maintenance at once: the domain, capped by the
        maintenance budget (``budget_hosts``), as ``lower_bound_hours`` divides by."""
        return fit_domain(self.domain_size, self.budget_hosts).effective

    def domain_size_note(self) -> str | None:
        """Why a domain larger than the budget runs as the budget's size (None when it fits):
        the words the live ``train start`` warns with."""
        return fit_domain(self.domain_size, self.budget_hosts).warning()

    def out_of_service_note(self) -> str:
        """Why ``max_out_of_service`` may exceed the budget with ``budget_violations`` at 0."""
        over = self.max_out_of_service - self.budget_hosts
        if over <= 0:
            return (
                f"at most {self.max_out_of_service} hosts out, "
                f"within the {self.budget_hosts}-host budget"
            )
        return (
            f"at the peak {over} host(s) beyond the {self.budget_hosts}-host maintenance budget "
            "were out of service for failures or repair (hosts failing while the train held its "
            "share), not for planned work; budget_violations counts planned work only"
        )

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            k: v
            for k, v in self.__dict__.items()
            if k not in ("series", "horizon_report") and v is not None
        }
        out["makespan_hours"] = _r(self.makespan_hours)
        out["lost_gpu_hours"] = _r(self.lost_gpu_hours)
        out["makespan_over_lower_bound"] = _r(self.makespan_ratio, 4)
        out["makespan_over_lower_bound_after_outages"] = _r(self.makespan_ratio_after_outages, 4)
        out["max_out_of_service_note"] = self.out_of_service_note()
        for k in (
            "lower_bound_hours",
            "lower_bound_after_outages_hours",
            "maintenance_work_host_hours",
            "outage_budget_hosts_mean",
            "lost_work_gpu_hours",
            "drain_wait_host_hours",
            "simulated_hours",
            "wall_seconds",
        ):
            out[k] = _r(out[k])
        out["utilisation"] = _r(self.utilisation, 4)
        if self.series is not None:
            out["series"] = [
                {"t": round(t, 4), "out_of_service": o, "in_maintenance": m}
                for t, o, m in self.series
            ]
        # Added last, so the fields before keep their values and their order.
        out["effective_domain_size"] = self.effective_domain_size
        note = self.domain_size_note()
        if note is not None:
            out["domain_size_note"] = note
        if self.horizon_report is not None:
            out.update({k: v for k, v in self.horizon_report.items() if not k.startswith("_")})
        return out


def visit_interval_summary(hours: list[float]) -> dict[str, float] | None:
    """Percentiles of the hours from the cycle's start to each host's visit.

    With the cycle restarting as soon as it completes, a host visited at ``t`` in this cycle
    and at ``t'`` in the next waits ``makespan - t + t'``: this distribution and the makespan
    bound every host's interval between visits (at most twice the makespan).
    """
    if not hours:
        return None
    xs = sorted(hours)

    def q(p: float) -> float:
        return round(xs[min(len(xs) - 1, int(p * len(xs)))], 3)

    return {"p50": q(0.5), "p90": q(0.9), "p99": q(0.99), "max": round(xs[-1], 3)}


def _r(x: float | None, nd: int = 3) -> float | None:
    return None if x is None else round(x, nd)
