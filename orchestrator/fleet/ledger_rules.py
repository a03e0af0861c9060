"""The host ledger's pure rules, the same under every backend: which state a host may leave for
which, whose hold counts against the maintenance budget, when a cordon is refused, and what a
planner sees of a host.

No backend state is read here: a backend counts what the rules ask for (the simulated cluster
from its incremental index, the Slurm cluster by scanning its record) and the rules decide.
``ledger.HostLedger`` applies them to records; ``sim_index`` and the Slurm session build their
views with ``host_view``.
"""

from __future__ import annotations

from typing import NamedTuple, Protocol

from orchestrator.contracts.constants import HELD_STATES, NOT_MAINTENANCE_OWNERS, PIGGYBACK_NOTE
from orchestrator.contracts.models import HostState
from orchestrator.contracts.views import HostView, is_due

S = HostState

# ------------------------------------------------------------ the state machine
#: A cordon takes only a host in service.
CORDONABLE = frozenset({S.IN_SERVICE})
#: ``start_drain``: a cordoned host whose job still runs becomes draining.
DRAINABLE = frozenset({S.CORDONED})
#: ``begin_update``: a held host with no job moves into maintenance.
UPDATABLE = frozenset({S.CORDONED, S.DRAINING, S.IN_MAINTENANCE})
#: ``begin_rollback``: a host whose new versions failed is reopened.
ROLLBACKABLE = frozenset({S.IN_MAINTENANCE, S.VERIFYING})
#: ``return_to_service``: only a verified host in verification goes back.
RETURNABLE = frozenset({S.VERIFYING})


class LedgerHost(Protocol):
    """What the rules read of a host record."""

    @property
    def name(self) -> str: ...
    @property
    def rack(self) -> str: ...
    @property
    def zone(self) -> str: ...
    @property
    def state(self) -> str: ...
    @property
    def owner(self) -> str: ...
    @property
    def job_id(self) -> int | None: ...
    @property
    def versions(self) -> dict[str, str]: ...
    @property
    def last_visit(self) -> float | None: ...
    @property
    def last_boot(self) -> float | None: ...
    @property
    def reason(self) -> str: ...


# --------------------------------------------------------------------- owners
def holds_planned_work(state: str, owner: str) -> bool:
    """The owner rule: a host counts against the maintenance budget when it is in a held state
    for an owner doing planned work (a train, an operation, a campaign), not for nobody, the
    repair pipeline or quarantine."""
    return state in HELD_STATES and owner not in NOT_MAINTENANCE_OWNERS


# ------------------------------------------------------------------- cordons
class Load(NamedTuple):
    """What a cordon of one host is weighed against: hosts out of service for any reason (in
    all, in its rack, in its zone) and hosts held for planned work by every owner."""

    down: int
    rack_down: int
    zone_down: int
    planned: int


def cordon_allowed(
    load: Load,
    limit: int,
    per_rack: int | None = None,
    per_zone: int | None = None,
    maintenance: int | None = None,
) -> bool:
    """Whether one more host may go out: the floor (``limit`` out for any reason, and per rack
    and zone when given) and the maintenance budget (``maintenance`` held for planned work)."""
    if load.down + 1 > limit:
        return False
    if maintenance is not None and load.planned + 1 > maintenance:
        return False
    if per_rack is not None and load.rack_down + 1 > per_rack:
        return False
    return per_zone is None or load.zone_down + 1 <= per_zone


def cordon_reason(owner: str, piggyback: bool = False) -> str:
    """The reason a cordoned host's record carries."""
    return f"maintenance by {owner}" + (f" ({PIGGYBACK_NOTE})" if piggyback else "")


def cordon_detail(
    owner: str,
    limit: int,
    per_rack: int | None,
    per_zone: int | None,
    maintenance: int | None,
    piggyback: bool,
) -> dict[str, object]:
    """What the record's ``host_state`` entry of a cordon says of the budget it was held to."""
    return {
        "owner": owner,
        "limit": limit,
        "per_rack": per_rack,
        "per_zone": per_zone,
        **({} if maintenance is None else {"maintenance": maintenance}),
        **({"piggyback": True} if piggyback else {}),
    }


# --------------------------------------------------------------------- views
def host_view(h: LedgerHost, cycle_started_hours: float | None) -> HostView:
    """A host record as a planner sees it (``due`` for the cycle that started then)."""
    return HostView(
        h.name,
        h.rack,
        h.zone,
        str(h.state),
        h.owner,
        h.job_id,
        cycle_started_hours is not None and is_due(h, cycle_started_hours),
        h.versions,
        h.last_visit,
        h.last_boot,
        reason="" if h.state == HostState.IN_SERVICE else h.reason,
    )


__all__ = [
    "CORDONABLE",
    "DRAINABLE",
    "RETURNABLE",
    "ROLLBACKABLE",
    "UPDATABLE",
    "LedgerHost",
    "Load",
    "cordon_allowed",
    "cordon_detail",
    "cordon_reason",
    "holds_planned_work",
    "host_view",
]
