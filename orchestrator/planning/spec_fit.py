"""Whether a train's domain and cycle target fit its budget on a cluster of a given size.

A domain larger than the maintenance budget cannot run as asked: no more hosts than the budget
allows are ever in maintenance at once, so it runs at the budget's size. The simulator reports it
(``SimResult.domain_size_note``) and the live commands (``train start``, ``train reconfigure``,
``campaign start``) clamp the domain before starting anything; both take their words from
:func:`fit_domain`, so a person reading either sees the same sentence. :func:`cycle_target_note`
says when a cycle target cannot be met at that size, from a lower bound on the cycle's length
(every host visited, the domain full the whole time, no time spent waiting for jobs).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from orchestrator.contracts import updates
from orchestrator.contracts.models import CapacityBudget
from orchestrator.contracts.ui_text import duration


@dataclass(frozen=True)
class DomainFit:
    """A domain as asked (``asked``) and as it runs (``effective``) under ``budget_hosts``."""

    asked: int
    budget_hosts: int
    effective: int

    @property
    def clamped(self) -> bool:
        return self.effective < self.asked

    def warning(self) -> str | None:
        """Why a domain larger than the budget runs as the budget's size (None when it fits)."""
        if not self.clamped:
            return None
        eff = self.effective
        return (
            f"the {self.budget_hosts}-host maintenance budget caps the domain at {eff} "
            f"host{'' if eff == 1 else 's'} (domain_size {self.asked} asked): any "
            f"domain_size of {eff} or more runs the same campaign"
        )


def fit_domain(domain_size: int, budget_hosts: int) -> DomainFit:
    """``domain_size`` capped by ``budget_hosts`` (never below one host)."""
    return DomainFit(domain_size, budget_hosts, max(1, min(domain_size, budget_hosts)))


def visit_hours(targets: dict[str, str]) -> float:
    """Fleet hours one drained visit spends in maintenance with every target pending (install,
    one reboot, verification: ``updates.maintenance_hours``), the drain's wait left out."""
    known = [c for c in targets if c in updates.PROFILES]
    return updates.maintenance_hours(updates.order_updates(known))


def cycle_floor_hours(hosts_total: int, domain_hosts: int, hours_per_visit: float) -> float:
    """The shortest cycle: ``hosts_total`` visits, ``domain_hosts`` at a time, each taking
    ``hours_per_visit``."""
    rounds = -(-hosts_total // max(1, domain_hosts))
    return rounds * hours_per_visit


def cycle_target_note(
    cycle_target_hours: float | None, hosts_total: int, domain_hosts: int, hours_per_visit: float
) -> str | None:
    """Why ``cycle_target`` cannot be met with ``domain_hosts`` at a time (None when it can, or
    when there is no target)."""
    if cycle_target_hours is None:
        return None
    floor = cycle_floor_hours(hosts_total, domain_hosts, hours_per_visit)
    if floor <= cycle_target_hours:
        return None
    return (
        f"cycle_target: {duration(cycle_target_hours)} cannot be met: {hosts_total} hosts, "
        f"{domain_hosts} at a time, ~{duration(hours_per_visit)} of maintenance each, take at "
        f"least {duration(floor)} (raise the budget and domain_size, or the target)"
    )


@dataclass(frozen=True)
class SpecFit:
    """A train spec's domain as it will run on a cluster, and what to warn about."""

    domain: DomainFit
    warnings: list[str] = field(default_factory=list)


def fit_train(
    domain_size: int,
    budget: CapacityBudget,
    hosts_total: int,
    targets: dict[str, str],
    cycle_target_hours: float | None = None,
) -> SpecFit:
    """The domain clamped to the maintenance budget on ``hosts_total`` hosts, with a warning
    for the clamp and one for a cycle target the clamped domain cannot meet.

    The budget must already allow a host (``CapacityBudget.require_hosts``)."""
    domain = fit_domain(domain_size, budget.maintenance_limit(hosts_total))
    notes = [
        domain.warning(),
        cycle_target_note(cycle_target_hours, hosts_total, domain.effective, visit_hours(targets)),
    ]
    return SpecFit(domain, [n for n in notes if n is not None])
