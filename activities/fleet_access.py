"""What every fleet activity class shares: a backend per worker thread, and errors in two words.

Activities see the fleet only through the backend interface (``orchestrator.contracts.backend``):
``cluster`` opens one transaction on one cluster, ``peek`` reads one without writing. Permanent
errors (no fleet, unknown cluster, a bad spec, a fleet file of another schema) become
non-retryable ``ApplicationError``s typed by their kind, which every retry policy lists.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import datetime
from pathlib import Path

from temporalio import activity
from temporalio.exceptions import ApplicationError

from activities.heartbeat import patient_heartbeat
from orchestrator.contracts.errors import PermanentError, UnknownCluster
from orchestrator.contracts.liveness import beating
from orchestrator.contracts.messages import OwnerCost
from orchestrator.fleet import ClusterBackend, FleetBackend, open_backend
from orchestrator.infra.logging import get_logger
from orchestrator.telemetry.cost_ledger import RecordFollower


def as_application_error(err: PermanentError) -> ApplicationError:
    """A permanent error as Temporal's non-retryable failure, typed by its kind."""
    return ApplicationError(str(err), type=err.kind, non_retryable=True)


log = get_logger(__name__)


class FleetAccess:
    """One fleet shared by an activity class: a backend per worker thread (SQLite connections
    are per thread), opened on first use."""

    def __init__(self, fleet: Path | str | Callable[[], FleetBackend]) -> None:
        """``fleet``: the store (a SQLite file or a PostgreSQL URL), or how to open it."""
        self._open = (lambda: open_backend(fleet)) if isinstance(fleet, Path | str) else fleet
        self._local = threading.local()

    @property
    def fleet(self) -> FleetBackend:
        fleet = getattr(self._local, "fleet", None)
        if fleet is None:
            try:
                fleet = self._open()
            except PermanentError as err:
                raise as_application_error(err) from None
            self._local.fleet = fleet
        return fleet

    def owner_cost(self, owner: str, cluster: str | None = None) -> OwnerCost | None:
        """What ``owner`` has cost the jobs (``owner_costs``)."""
        return self.owner_costs([owner], cluster)

    def owner_costs(self, owners: list[str], cluster: str | None = None) -> OwnerCost | None:
        """What ``owners`` have cost the jobs (of ``cluster`` only, when given), read from the
        fleet's record by a follower this worker keeps (None, and a warning, if the record
        cannot be read: an activity never fails for its page's figures)."""
        follower = self.__dict__.setdefault("_cost_follower", RecordFollower())
        try:
            return OwnerCost.model_validate(follower.owner_cost(self.fleet, owners, cluster))
        except Exception as err:
            log.warning("maintenance cost not read from the record", error=str(err))
            return None

    def require_cluster(self, name: str) -> None:
        if name not in self.fleet.cluster_names():
            err = UnknownCluster(f"cluster: unknown cluster {name!r}", field="cluster")
            raise as_application_error(err)

    @contextmanager
    def cluster(self, name: str, wall: datetime) -> Iterator[ClusterBackend]:
        """One transaction on cluster ``name`` at the caller's fleet time; what it waits on
        (a Slurm hook) heartbeats the running activity, so a long wait is not taken for a
        dead worker and run again beside itself."""
        beat = patient_heartbeat() if activity.in_activity() else None
        try:
            with beating(beat), self.fleet.cluster(name, wall) as b:
                yield b
        except PermanentError as err:
            raise as_application_error(err) from None

    def peek(self, name: str, wall: datetime) -> ClusterBackend:
        try:
            return self.fleet.peek(name, wall)
        except PermanentError as err:
            raise as_application_error(err) from None
