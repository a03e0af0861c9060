"""One maintenance domain: drain its cordoned hosts, update, verify, return or quarantine.

The hosts arrive cordoned by the train. Hosts free of jobs go straight to their updates; hosts
with a job wait as the drain policy says (to the job's end, or its next checkpoint, then evict,
never past the deadline). Whatever happens, including cancellation of the train, every host
leaves this workflow back in service (verified), quarantined with a reason, or with the repair
pipeline: the ``finally`` hands back anything still held.
"""

from __future__ import annotations

import asyncio
import contextlib

from temporalio import workflow
from temporalio.exceptions import CancelledError

with workflow.unsafe.imports_passed_through():
    from activities.fleet_activities import FleetActivities
    from orchestrator.contracts.messages import (
        AskResult,
        EvictRequest,
        HostsRequest,
        JobWait,
        SwitchRequest,
        SwitchResult,
        UpdateResult,
        VerifyResult,
    )
    from orchestrator.contracts.train_types import DomainInput, DomainProgress, DomainResult
    from orchestrator.contracts.ui_text import at_hour, job_wait, names, plural, versions
    from orchestrator.execution import drain_sequence as ds
    from orchestrator.execution.drain import RELEASE_POLICIES, DrainTracker
    from orchestrator.execution.switches import SWITCH_ATTEMPTS, SWITCH_RETRY_HOURS
    from orchestrator.train.ui import domain_details
    from workflows.fleet_timing import fleet_call, fleet_hours_now, sleep_until


@workflow.defn(name="DomainMaintenance")
class DomainMaintenance:
    def __init__(self) -> None:
        self.phase = "draining"
        self.waiting: dict[str, str] = {}
        #: host -> (phase, what it waits for or how it ended): the UI's table, and the query's.
        self.hosts: dict[str, tuple[str, str]] = {}
        self.inp: DomainInput | None = None
        self._drained = False  # every host of the domain has gone to its install
        self._maintaining = 0  # batches between their install and their verification

    @workflow.query(name="phase")
    def current_phase(self) -> dict[str, object]:
        return {
            "phase": self.phase,
            "waiting": self.waiting,
            "hosts": {h: f"{p}: {n}" for h, (p, n) in sorted(self.hosts.items())},
        }

    def _mark(self, hosts: list[str], phase: str, note: str) -> None:
        for h in hosts:
            self.hosts[h] = (phase, note)

    def _show(self) -> None:
        """This domain's page in the UI: every host's phase and wait (not a command)."""
        inp = self.inp
        if inp is not None:
            workflow.set_current_details(
                domain_details(inp.domain_id, inp.cluster, self.phase, inp.targets, self.hosts)
            )

    def _req(self, inp: DomainInput, hosts: list[str], **kw: object) -> HostsRequest:
        return HostsRequest(
            cluster=inp.cluster,
            owner=inp.owner,
            hosts=hosts,
            wall=workflow.now(),
            targets=inp.targets,
            policy=inp.policy,
            visit=inp.visit,
            cycle_target_hours=inp.cycle_target_hours,
            **kw,  # type: ignore[arg-type]
        )

    def _tracker(self, inp: DomainInput, now: float) -> DrainTracker:
        """The drain's tracker, its deadline ``max_wait_hours`` after ``now``."""
        talks = inp.negotiate
        release = talks and inp.policy in RELEASE_POLICIES
        return DrainTracker(
            now + inp.max_wait_hours,
            negotiate=talks,
            max_refusals=inp.max_refusals,
            release=release,
        )

    @workflow.run
    async def run(self, inp: DomainInput) -> DomainResult:
        self.inp = inp
        self._mark(inp.hosts, "cordoned", "cordoned; looking at its jobs")
        self._show()
        result = DomainResult(domain_id=inp.domain_id)
        tasks: list[asyncio.Task[None]] = []
        # A switch_firmware target makes this a rack visit: the whole rack drains before its
        # switch is updated, then its hosts are updated and verified.
        rack = "switch_firmware" in inp.targets
        # The tracker is made at the first look, with the real deadline; a domain that knows
        # its start looks with it at once.
        seq = ds.DrainSequence(list(inp.hosts), together=rack)
        if inp.start_hours is not None:
            seq.begin(self._tracker(inp, fleet_hours_now(inp.clock)))
        try:
            while not isinstance(cmd := seq.next(), ds.Drained):
                if isinstance(cmd, ds.Look):
                    await self._look(inp, seq, cmd, result)
                elif isinstance(cmd, ds.Install):
                    if rack:
                        await self._update_switches(inp, cmd.hosts)
                    tasks.append(asyncio.create_task(self._maintain(inp, cmd.hosts, result)))
                elif isinstance(cmd, ds.Release):
                    await self._release_refused(inp, cmd, result)
                elif isinstance(cmd, ds.Evict):
                    await self._evict(inp, seq, cmd, result)
                elif isinstance(cmd, ds.Ask):
                    await self._ask(inp, seq, cmd)
                else:
                    await self._wait(inp, seq, cmd)
            self.waiting = {}
            self._drained = True
            await asyncio.gather(*tasks)
        except (asyncio.CancelledError, CancelledError):
            self.phase = "cancelled: handing hosts back"
            for t in tasks:
                t.cancel()
            await self._hand_back(inp, result)
            raise
        except BaseException:
            await self._hand_back(inp, result)
            raise
        self.phase = "done"
        self._show()
        return result

    async def _maintain(self, inp: DomainInput, hosts: list[str], result: DomainResult) -> None:
        """Update, wait out the install in fleet time, verify, return or quarantine."""
        self._maintaining += 1
        try:
            await self._maintain_batch(inp, hosts, result)
        finally:
            self._maintaining -= 1

    async def _maintain_batch(
        self, inp: DomainInput, hosts: list[str], result: DomainResult
    ) -> None:
        self.phase = "updating"
        self._mark(hosts, "updating", f"installing {versions(inp.targets)}")
        self._show()
        upd: UpdateResult = await fleet_call(
            FleetActivities.apply_updates,
            self._req(inp, hosts),
            summary=f"update {plural(len(hosts), 'host')} ({names(hosts, 3)}) to "
            f"{versions(inp.targets)}",
            heartbeat=True,
        )
        for h, why in upd.failed.items():
            self._mark([h], "quarantined", f"update failed: {why}")
        if upd.updated:
            until = at_hour(upd.fleet_hours + upd.duration_hours, upd.fleet_hours)
            self._mark(upd.updated, "installing", f"install and reboot until {until}")
        self._show()
        for step in ds.maintain_steps(upd):
            if isinstance(step, ds.Quarantine):
                await self._quarantine(inp, step, upd, result)
            elif isinstance(step, ds.WaitUntil):
                await sleep_until(inp.clock, step.at_hours, step.now)
            elif isinstance(step, ds.Verify):
                await self._verify(inp, step.hosts, result)

    async def _quarantine(
        self, inp: DomainInput, step: ds.Quarantine, upd: UpdateResult, result: DomainResult
    ) -> None:
        hosts = sorted(step.hosts)
        # Each host's own reason (a hook that timed out says so on the node), and the hosts
        # handed over during their install (an operator drained them) lost, not failed.
        q: VerifyResult = await fleet_call(
            FleetActivities.quarantine_hosts,
            self._req(inp, hosts, reason=step.reason, reasons=step.reasons),
            summary=f"quarantine {names(hosts, 3)}: {step.reason}",
        )
        result.quarantined.update({h: upd.failed[h] for h in q.quarantined})
        for h in sorted(set(upd.lost) - set(q.quarantined)):
            result.lost_to_repair[h] = upd.lost[h]
            self._mark([h], "handed over", upd.lost[h])
        result.outcomes += [False] * len(q.quarantined)
        await self._tell_parent(inp, [False] * len(q.quarantined))

    async def _verify(self, inp: DomainInput, hosts: list[str], result: DomainResult) -> None:
        """Verify the installed hosts; return those that pass, quarantine the others."""
        self.phase = "verifying"
        self._mark(hosts, "verifying", "diagnostics, bandwidth and version checks")
        self._show()
        ver: VerifyResult = await fleet_call(
            FleetActivities.verify_and_return,
            self._req(inp, hosts),
            summary=f"verify {plural(len(hosts), 'host')} and return those that pass",
        )
        self._mark(ver.returned, "returned", "verified, back in service")
        for h, why in ver.quarantined.items():
            self._mark([h], "quarantined", f"verification failed: {why}")
        self._show()
        result.returned += ver.returned
        result.quarantined.update(ver.quarantined)
        outcomes = [h in ver.returned for h in sorted([*ver.returned, *ver.quarantined])]
        result.outcomes += outcomes
        if self._drained and self._maintaining == 1:
            result.untold += outcomes  # the last batch: the domain ends now, its result tells
            return
        await self._tell_parent(inp, outcomes)

    async def _show_talks(
        self, inp: DomainInput, tracker: DrainTracker, waits: list[JobWait]
    ) -> None:
        """Each job's question, answer and resulting wait: in the ``phase`` query, on its hosts
        in the UI's current details, and in the train's status (a message that wakes nobody)."""
        talks = tracker.describe()
        self.waiting.update(talks)
        for w in waits:
            if str(w.job_id) in talks:
                self._mark(w.hosts, "draining", f"job {w.job_id} {talks[str(w.job_id)]}")
        self._show()
        await _signal_train(DomainProgress(domain_id=inp.domain_id, negotiations=talks))

    async def _look(
        self, inp: DomainInput, seq: ds.DrainSequence, cmd: ds.Look, result: DomainResult
    ) -> None:
        """One look at the drain; what it says goes into ``seq`` (and the UI)."""
        status = await fleet_call(
            FleetActivities.drain_status,
            self._req(inp, cmd.hosts, deadline_hours=cmd.deadline_hours),
            summary=f"drain check of {plural(len(cmd.hosts), 'host')} of {inp.cluster}",
        )
        now = status.fleet_hours
        tracker = seq.tracker
        if tracker is None:
            seq.looked(status)  # the first look only sets the deadline: look again with it
            seq.begin(self._tracker(inp, now))
            return
        for host, why in status.lost.items():
            result.lost_to_repair[host] = why
            self._mark([host], "in repair", f"left for repair: {why}")
        # A job already asked: its hosts show what it answered and when it is really
        # evicted (the negotiation's time, not the bare deadline rule's).
        answered = tracker.describe() if tracker.negotiate else {}
        for w in status.waits:
            said = answered.get(str(w.job_id))
            note = f"job {w.job_id} {said}" if said else None
            self._mark(w.hosts, "draining", note or job_wait(w.job_id, w.action, w.at_hours, now))
        if status.ready and seq.together:
            self._mark(status.ready, "drained", "free of jobs; waiting for its rack")
        seq.looked(status)

    async def _wait(self, inp: DomainInput, seq: ds.DrainSequence, cmd: ds.WaitUntil) -> None:
        self.phase = "draining"
        self.waiting = {
            str(w.job_id): f"{w.action} at fleet hour {w.at_hours:.2f}" for w in seq.waits
        }
        self.waiting.update(seq.tracker.describe() if seq.tracker else {})
        self._show()
        await sleep_until(inp.clock, cmd.at_hours, cmd.now, look=True)

    async def _evict(
        self, inp: DomainInput, seq: ds.DrainSequence, cmd: ds.Evict, result: DomainResult
    ) -> None:
        self.phase = "evicting"
        for w in seq.waits:
            if w.job_id in cmd.job_ids:
                self._mark(w.hosts, "evicting", f"evicting job {w.job_id}")
        self._show()
        res = await fleet_call(
            FleetActivities.evict_jobs,
            EvictRequest(
                cluster=inp.cluster,
                owner=inp.owner,
                job_ids=cmd.job_ids,
                wall=workflow.now(),
                scheduled_hours=cmd.scheduled_hours,
            ),
            summary=f"evict job {names([str(j) for j in cmd.job_ids])}",
        )
        result.jobs_interrupted += res.interrupted
        result.lost_gpu_hours += res.lost_gpu_hours

    async def _ask(self, inp: DomainInput, seq: ds.DrainSequence, cmd: ds.Ask) -> None:
        self.phase = "asking jobs"
        asked: AskResult = await fleet_call(
            FleetActivities.ask_jobs,
            cmd.request(inp.cluster, inp.owner, workflow.now()),
        )
        seq.heard(cmd, asked)
        assert seq.tracker is not None
        await self._show_talks(inp, seq.tracker, seq.waits)

    # ------------------------------------------------------------ rack switch
    async def _update_switches(self, inp: DomainInput, hosts: list[str]) -> None:
        """Update the drained rack's switch and wait out its install and reboot. A switch that
        cannot be updated (a host came back from repair into service under it meanwhile) is
        tried again a few times; then this visit gives its hosts their own updates only."""
        version = inp.targets["switch_firmware"]
        self.phase = "updating rack switch"
        for attempt in range(SWITCH_ATTEMPTS):
            self._mark(hosts, "switch", f"rack switch to switch_firmware={version}")
            self._show()
            sw: SwitchResult = await fleet_call(
                FleetActivities.update_switches,
                SwitchRequest(
                    cluster=inp.cluster,
                    owner=inp.owner,
                    wall=workflow.now(),
                    hosts=hosts,
                    version=version,
                ),
                summary=f"update the rack switch above {names(hosts, 2)} to {version}",
            )
            if sw.done:
                if sw.duration_hours:
                    until = sw.fleet_hours + sw.duration_hours
                    self._mark(
                        hosts, "switch", f"switch reboots until {at_hour(until, sw.fleet_hours)}"
                    )
                    self._show()
                    await sleep_until(inp.clock, until, sw.fleet_hours)
                return
            why = "; ".join(f"{r}: {w}" for r, w in sw.racks.items() if w)
            workflow.logger.warning("rack switch not updated (attempt %d): %s", attempt + 1, why)
            await sleep_until(inp.clock, sw.fleet_hours + SWITCH_RETRY_HOURS, sw.fleet_hours)
        inp.targets = {c: v for c, v in inp.targets.items() if c != "switch_firmware"}

    # -------------------------------------------------- hand back and telling
    async def _release_refused(
        self, inp: DomainInput, cmd: ds.Release, result: DomainResult
    ) -> None:
        """Hand the hosts of jobs that said "not now" back untouched (no visit): the budget
        goes to hosts that can be drained now; the train takes them again once the job may be
        asked again (``DrainTracker.release``). The train is told: it has room to plan."""
        hosts = cmd.hosts
        back: VerifyResult = await fleet_call(
            FleetActivities.release_hosts,
            self._req(inp, hosts),
            summary=f"hand back {plural(len(hosts), 'host')} of job "
            f"{names([str(j) for j in sorted(cmd.jobs)])}: not now",
        )
        self._mark(hosts, "released", "its job said not now: handed back, asked again later")
        self._show()
        result.released += back.returned
        result.quarantined.update(back.quarantined)
        await self._tell_parent(inp, [], released=hosts)

    async def _tell_parent(
        self, inp: DomainInput, outcomes: list[bool], released: list[str] | None = None
    ) -> None:
        """Tell the train how a batch went, as it happens: it counts failures (and may halt)
        at once, and hosts went back, so it may take more before this domain ends."""
        back = list(released or [])
        await _signal_train(
            DomainProgress(domain_id=inp.domain_id, outcomes=outcomes, released=back)
        )

    async def _hand_back(self, inp: DomainInput, result: DomainResult) -> None:
        """Release untouched hosts and verify touched ones, so none is left cordoned."""
        back: VerifyResult = await fleet_call(
            FleetActivities.release_hosts,
            self._req(inp, list(inp.hosts)),
            summary=f"hand back {plural(len(inp.hosts), 'host')} not yet done",
        )
        self._mark(back.returned, "released", "handed back to service")
        for h, why in back.quarantined.items():
            self._mark([h], "quarantined", why)
        self._show()
        result.released += back.returned
        result.quarantined.update(back.quarantined)
        if back.visited:
            # This domain ends without a result: tell the train which hosts it visited.
            with contextlib.suppress(Exception):  # a train already gone counts nothing
                await _signal_train(
                    DomainProgress(domain_id=inp.domain_id, visited=list(back.visited))
                )


async def _signal_train(progress: DomainProgress) -> None:
    """Send ``progress`` to the train that runs this domain (none: a domain run alone)."""
    parent = workflow.info().parent
    if parent is not None:
        await workflow.get_external_workflow_handle(parent.workflow_id).signal(
            "domain_progress", progress
        )
