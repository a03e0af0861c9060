"""Names every layer shares: owners a host can have, the states that count as held, the queue.

One place per concept, so a renamed owner or an added state cannot drift between the fleet, the
planners, the execution core, the audit and the workflows.
"""

from __future__ import annotations

from orchestrator.contracts.models import HostState

#: This release of trainctl (``pyproject.toml``'s version): a worker names it in its identity,
#: and refuses to start beside open workflows of an older series (``app.release_guard``).
RELEASE = "0.2.0"

#: The fastest a simulated fleet's time may run: 1e6 fleet seconds per wall second (11.6 fleet
#: days). The fleet simulates every fleet hour that passes (about 3 ms per hour for a 3,072-host
#: cluster here), so a larger factor only makes every read spin catching up. ``--speed max``
#: means this speed.
MAX_SPEED_FACTOR = 1e6
#: The speed that fleets built with ``--speed max`` before it meant ``MAX_SPEED_FACTOR`` stored
#: (and that workflow inputs of that time carry): read as ``MAX_SPEED_FACTOR``.
LEGACY_MAX_SPEED = 0.0

#: The task queue workers poll by default (one deployment of trainctl).
TASK_QUEUE = "trainctl"

#: Owner of a host nobody holds (in service).
NO_OWNER = ""
#: The repair pipeline: a failed host, or one triaged after quarantine.
REPAIR_OWNER = "repair"
#: A host quarantined with a reason, waiting for a person to triage it.
QUARANTINE_OWNER = "quarantine"
#: Owners that are not maintenance campaigns (trains, operations): they never hold budget slots
#: of planned work and never hand a host over by ending.
NOT_MAINTENANCE_OWNERS = frozenset({NO_OWNER, REPAIR_OWNER, QUARANTINE_OWNER})

#: Reason suffix of a cordon the fleet made for a train's piggyback claim (``sim_piggyback``).
PIGGYBACK_NOTE = "piggybacked: its job ended or failed"

#: States of a host held for maintenance by a train or an operation.
HELD_STATES = frozenset(
    {HostState.CORDONED, HostState.DRAINING, HostState.IN_MAINTENANCE, HostState.VERIFYING}
)
#: States of a host out for repair (quarantined for triage, or in the repair pipeline): no
#: maintenance owner holds it, and it takes pending changes before it serves again.
REPAIR_STATES = frozenset({HostState.QUARANTINED, HostState.IN_REPAIR})
#: States in which a held host has not been touched yet: giving it back needs no verification.
UNTOUCHED_STATES = frozenset({HostState.CORDONED, HostState.DRAINING})

#: Install attempts per host before a transient failure is taken for a broken host. Retries are
#: immediate and cost no extra fleet time (the package is already staged).
INSTALL_ATTEMPTS = 3
