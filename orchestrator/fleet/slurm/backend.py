"""The Slurm backend: the fleet-backend Protocols over a real Slurm cluster.

Hosts are the nodes of the configured partitions; trainctl's own record (versions, holders,
visits, the event log) stays in SQLite (``store``). Each ``cluster`` session is one SQLite
``BEGIN IMMEDIATE`` transaction: read Slurm (``sinfo``/``squeue``), reconcile the record with
it, act, append the events. Fleet time is wall time (speed 1).

This module is the one name everyone imports, and the answers of the Protocol that Slurm has no
counterpart for (no injected faults, no switch firmware, no choice of image); the parts live
beside it, each with one job:

- ``core``: ``SlurmCore``, the record held, the clock, the event log, the drain reason, the reads;
- ``jobs``: ``RunningJob``, a Slurm job in fleet hours, and the checkpoints it declares;
- ``reconcile``: ``Reconciler``, ``sync``: the record made to agree with what Slurm shows;
- ``job_ops``: ``JobOps``, what a job answers before maintenance, and its requeue;
- ``holds``: ``HoldOps``, the budget-checked cordon (a drain naming its owner) and every
  hand-over: return, release, quarantine, repair, reclaim;
- ``steering``: ``SteeringOps``, a train's claim as node weights Slurm places jobs by;
- ``piggyback``: ``PiggybackOps``, the claim kept, freed due nodes taken, the next domain
  held by a maintenance reservation;
- ``verify``: ``VerifyOps``, the reboot seen through, the health check, the versions checked;
- ``install``: ``InstallOps``, the config's hooks in dependency order, then one reboot;
- ``hooks``: a site command run in a session of its own, killed whole at its timeout.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

from orchestrator.contracts.errors import SlurmRefused
from orchestrator.fleet.slurm.holds import HoldOps
from orchestrator.fleet.slurm.install import InstallOps
from orchestrator.fleet.slurm.piggyback import PiggybackOps

if TYPE_CHECKING:
    from orchestrator.contracts.backend import ClusterBackend


class SlurmCluster(HoldOps, InstallOps, PiggybackOps):
    """One Slurm cluster at wall-clock fleet hour ``now``: the ``ClusterBackend`` Protocol."""

    def sync(self) -> None:
        """Slurm read and the record reconciled; then freed due nodes taken for a claim."""
        super().sync()
        if self.writable:
            self.take_freed()

    def rack_switches(self) -> dict[str, str]:
        """Slurm knows no switch firmware: no rack switch is ever due through this backend."""
        return {}

    def update_switch(self, rack: str, version: str, actor: str) -> str:
        return "rack switches are not managed through the Slurm backend"

    def change_failure_rate(self, components: Iterable[str]) -> float:
        return 0.0

    def set_reimage(self, name: str, versions: dict[str, str], actor: str) -> bool:
        """People repair Slurm nodes (and image them); trainctl cannot choose the image."""
        return False

    def inject_fault(self, component: str, version: str, rate: float, actor: str) -> None:
        raise SlurmRefused(
            "fleet: a Slurm cluster runs real builds: faults cannot be injected "
            "(use a hook that fails instead)",
            field="fleet",
        )


if TYPE_CHECKING:

    def _is_a_cluster_backend(b: SlurmCluster) -> ClusterBackend:
        """For mypy: the Slurm cluster implements the whole backend Protocol."""
        return b


__all__ = ["SlurmCluster"]
