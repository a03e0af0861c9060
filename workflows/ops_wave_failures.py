"""What a cluster's operation does when hosts go wrong in a wave: the health check before the
change, the failure gate (an explicit ``max_failures`` or the bad-build rule), quarantining
hosts with a reason, and rolling a failed wave back to the versions it had.

The lowest part of ``ClusterOperation`` (a mixin under ``WaveSteps``, which provides the calls
it makes), kept apart for size: ``workflows.ops_wave`` keeps how a wave drains and changes.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from temporalio import workflow

from activities.fleet_activities import FleetActivities
from activities.ops_activities import OpsActivities
from orchestrator.contracts.messages import HostsRequest, UpdateResult, VerifyOutcome
from orchestrator.contracts.ops_types import (
    ClusterOpInput,
    ClusterProgress,
    RollbackRequest,
    TakenWave,
    VerifyRequest,
)
from orchestrator.contracts.ui_text import names, plural
from orchestrator.execution.baseline import HealthBaseline
from orchestrator.planning.failure_gate import judge


class WaveFailures:
    """Health check, failure gate, quarantine and rollback of a wave; the state and the calls
    come from ``WaveSteps`` and the workflow."""

    inp: ClusterOpInput
    p: ClusterProgress

    # Provided by WaveSteps.
    async def _call(
        self, fn: Callable[..., Any], arg: Any, heartbeat: bool = False, summary: str | None = None
    ) -> Any: ...
    def _show(self) -> None: ...
    def _mark(self, hosts: list[str], phase: str, note: str) -> None: ...
    def _hosts(self, hosts: list[str], **kw: Any) -> HostsRequest: ...  # type: ignore[empty-body]
    def _verify(self, hosts: list[str], **kw: Any) -> VerifyRequest: ...  # type: ignore[empty-body]
    async def _phase(self, state: str, reason: str | None = None) -> None: ...
    async def _wait_fleet(self, target: float, now: float, interruptible: bool = True) -> None: ...

    async def _check_health(self, ready: list[str]) -> list[str]:
        """Check the drained hosts before their change; the healthy ones (the rest quarantined).

        A host already failing diagnostics or bandwidth is its own failure, not the change's:
        it is quarantined (repair takes it, and gives it the targets) and is not counted.
        """
        p, spec = self.p, self.inp.spec
        self._mark(ready, "checking", "diagnostics and bandwidth before the change")
        await self._phase("checking")
        health: HealthBaseline = await self._call(
            OpsActivities.check_health,
            self._verify(ready, targets=spec.targets, reason=self.inp.operation_id),
            summary=f"check {plural(len(ready), 'host')} before the change",
        )
        self._defer_lost(health.gone)
        for h, why in health.unhealthy.items():
            self._mark([h], "failed", why)
        p.hosts_quarantined += len(health.unhealthy)
        p.hosts_failing_before += len(health.unhealthy)
        p.base_rate = health.base_rate
        return health.healthy

    def _defer_lost(self, lost: Mapping[str, str]) -> bool:
        """Hosts of the wave that left our hands for repair before their change: deferred
        (repair's reimage gives them the change, the fleet's target), not failures. False, with
        nothing done, when there are none, and in runs recorded before."""
        if not lost:
            return False
        p = self.p
        for h, why in lost.items():
            self._mark([h], "deferred", f"left for repair ({why}): takes the change there")
        p.lost_to_repair = sorted({*p.lost_to_repair, *lost})
        p.deferred_hosts = sorted({*p.deferred_hosts, *lost})
        p.hosts_deferred = len(p.deferred_hosts)
        return True

    def _without_lost(self, upd: UpdateResult) -> UpdateResult:
        """An install's result without the hosts repair took before it (deferred, not failed)."""
        if not self._defer_lost(upd.lost):
            return upd
        failed = {h: why for h, why in upd.failed.items() if h not in upd.lost}
        return upd.model_copy(update={"failed": failed})

    def _over_max_failures(self) -> str:
        """An explicit ``max_failures`` (0 in runs recorded before the gate): '' or why stop."""
        limit = self.inp.spec.max_failures or 0
        if self.p.failures > limit:
            return f"{self.p.failures} failures above max_failures {limit}"
        return ""

    def _judge(self, changed: int) -> str:
        """The bad-build rule over the cluster's changed hosts so far: '' or why stop."""
        p = self.p
        p.gate_changed += changed
        verdict = judge(p.failures, p.gate_changed, p.base_rate)
        p.gate_threshold, p.gate_reason = verdict.threshold, verdict.reason
        return verdict.reason if verdict.bad else ""

    async def _quarantine(self, hosts: dict[str, str], why: str) -> None:
        if hosts:
            reason = f"{self.inp.operation_id}: {why}"
            await self._call(
                FleetActivities.quarantine_hosts,
                self._hosts(sorted(hosts), reason=reason),
                summary=f"quarantine {names(sorted(hosts), 3)}: {why}",
            )
            self.p.hosts_quarantined += len(hosts)

    async def _roll_back(
        self, wave: TakenWave, upd: UpdateResult, failed: dict[str, str], over: str
    ) -> str:
        """Put every changed host of the wave back on its previous versions; why we stop."""
        p = self.p
        await self._phase("rolling_back")
        await self._quarantine(upd.failed, "install failed")  # nothing installed on them
        previous = {h: wave.previous[h] for h in upd.updated}
        self._mark(list(previous), "rolling back", "reinstalling its previous versions")
        self._show()
        rb: UpdateResult = await self._call(
            OpsActivities.rollback,
            RollbackRequest(
                cluster=self.inp.cluster,
                owner=self.inp.operation_id,
                wall=workflow.now(),
                previous=previous,
            ),
            heartbeat=True,
            summary=f"roll {plural(len(previous), 'host')} back to their previous versions",
        )
        if rb.updated:
            await self._wait_fleet(rb.fleet_hours + rb.duration_hours, rb.fleet_hours, False)
        back: VerifyOutcome = await self._call(
            OpsActivities.verify,
            self._verify(
                rb.updated,
                per_host=previous,
                return_passed=True,
                quarantine_failed=True,
                reason=f"{self.inp.operation_id}: failed after rollback",
            ),
            summary=f"verify and return {plural(len(rb.updated), 'rolled-back host')}",
        )
        self._mark(back.passed, "rolled back", "back on its previous versions, in service")
        for h, why in back.failed.items():
            self._mark([h], "quarantined", f"failed after rollback: {why}")
        p.hosts_quarantined += len(back.failed)
        await self._quarantine(rb.failed, "rollback failed")
        p.hosts_rolled_back += len(back.passed)
        p.wave_hosts = 0
        sample = "; ".join(f"{h}: {why}" for h, why in sorted(failed.items())[:2])
        return (
            f"wave {p.waves_done + 1}: {len(failed)} of {len(wave.hosts)} "
            f"hosts failed ({sample}{'; ...' if len(failed) > 2 else ''}), "
            f"{over}; wave rolled back: "
            f"{len(back.passed)} hosts back on their previous versions, "
            f"{len(back.failed) + len(rb.failed) + len(upd.failed)} quarantined"
        )
