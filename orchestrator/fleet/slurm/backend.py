"""The Slurm backend: the fleet-backend Protocols over a real Slurm cluster.

Hosts are the nodes of the configured partitions; trainctl's own record (versions, holders,
visits, the event log) stays in SQLite (``store``). Each ``cluster`` session is one SQLite
``BEGIN IMMEDIATE`` transaction: read Slurm (``sinfo``/``squeue``), reconcile the record with
it, act, append the events. Reconciling is what makes the record survive Slurm's own changes:

- a node drained or downed by someone else (an operator, Slurm's health check) is out of
  service with Slurm's reason (quarantined, or in repair when Slurm set it down), counts
  against every budget, and is never resumed by trainctl; when someone resumes it, it is back;
- a node trainctl holds but Slurm no longer shows drained (the drain was lost) is drained again,
  and one drained with trainctl's reason but missing from the record (a session that failed
  after the drain) is adopted by the owner its reason names, who then hands it back;
- node features ``<component>_<version>`` follow the record, so they come back after a
  controller restart (which forgets features set by ``scontrol update``).

A cordon is ``scontrol update state=drain reason="trainctl:<owner> ..."``; an eviction is
``scontrol requeue`` (``scancel`` only for a job that cannot be requeued, recorded as such);
installs run the config's hooks, a reboot is ``scontrol reboot ASAP nextstate=DOWN``, and the
node is resumed only after it passed its health check. Fleet time is wall time (speed 1).
"""

from __future__ import annotations

import re
import subprocess
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from orchestrator.constants import (
    HELD_STATES,
    NO_OWNER,
    NOT_MAINTENANCE_OWNERS,
    QUARANTINE_OWNER,
    REPAIR_OWNER,
    UNTOUCHED_STATES,
)
from orchestrator.errors import (
    SlurmRefused,
    TemporaryError,
    UnknownCluster,
)
from orchestrator.fleet.backend import (
    InstallOutcome,
    JobAnswer,
    PiggybackClaim,
    RecordEntry,
    RefusalNote,
    Verification,
)
from orchestrator.fleet.sim_records import HostRec
from orchestrator.fleet.slurm.commands import SlurmCommands, SlurmJob, SlurmNode
from orchestrator.fleet.slurm.config import (
    EX_TEMPFAIL,
    SlurmBackendConfig,
    render,
)
from orchestrator.models import GPUS_PER_HOST, HostState
from orchestrator.updates import PROFILES, pending_components
from orchestrator.views import ClusterSnapshot, HostView, JobView, is_due, visited_since

if TYPE_CHECKING:
    from orchestrator.fleet.backend import ClusterBackend

S = HostState
#: Every drain reason trainctl sets starts with this; the owner follows it.
REASON_PREFIX = "trainctl:"
_REASON_OWNER = re.compile(r"^trainctl:(\S+)")
#: The actor of events that record what Slurm did or showed (not what trainctl did).
SLURM_ACTOR = "slurm"
#: Node weights that steer jobs (``set_piggyback``): Slurm allocates the lowest weight first,
#: and 1 is slurm.conf's default, which visited nodes keep.
DEFAULT_WEIGHT = 1
DUE_WEIGHT = 100
#: Seconds verify waits within one call for a node's reboot to finish before it asks to be
#: called again (a temporary error), so a session never holds the record for long.
REBOOT_WAIT_SECONDS = 40.0
#: Seconds after which a reboot Slurm shows no sign of (no flag, no new boot) is asked again.
REBOOT_REASK_SECONDS = 15.0
_CKPT = re.compile(r"(?:^|[\s,;])ckpt=(\S+?)(?=$|[\s,;])")
_EVICT = re.compile(r"(?:^|[\s,;])evict=(go|wait|refuse)(?=$|[\s,;])")


@dataclass
class _Job:
    """A running Slurm job, in fleet hours; ``state`` as the status summary counts it."""

    slurm: SlurmJob
    start_hours: float
    end_hours: float
    ckpt_hours: float | None
    state: str = "running"

    def view(self, now: float) -> JobView:
        from orchestrator.views import last_checkpoint, next_checkpoint

        interval = self.ckpt_hours or max(self.end_hours - self.start_hours, 1e-9)
        return JobView(
            self.slurm.id,
            len(self.slurm.nodes),
            self.slurm.nodes,
            self.end_hours,
            next_checkpoint(self.start_hours, interval, now, self.end_hours),
            last_checkpoint(self.start_hours, interval, now, self.end_hours),
        )


def declared_checkpoint_hours(comment: str) -> float | None:
    """The checkpoint interval a job declares in its ``--comment`` (``ckpt=10m``), if any."""
    from orchestrator.models import parse_duration_hours

    m = _CKPT.search(comment)
    if not m:
        return None
    try:
        hours = parse_duration_hours(m.group(1), "comment.ckpt")
    except ValueError:
        return None
    return hours if hours > 0 else None


class SlurmCluster:
    """One Slurm cluster at wall-clock fleet hour ``now``: the ``ClusterBackend`` Protocol."""

    def __init__(
        self,
        name: str,
        now: float,
        anchor: float,
        hosts: list[HostRec],
        state: dict[str, Any],
        commands: SlurmCommands,
        config: SlurmBackendConfig,
        writable: bool,
    ) -> None:
        self.name = name
        self._now = now
        self._anchor = anchor  # Unix seconds of fleet hour 0
        self.hosts = {h.name: h for h in hosts}
        self.order = [h.name for h in hosts]
        self.state = state
        self.state.setdefault("targets", {})
        self.cmd = commands
        self.config = config
        self.writable = writable
        self.events: list[RecordEntry] = []
        self.dirty: set[str] = set()
        self.nodes: dict[str, SlurmNode] = {}
        self.jobs: dict[int, _Job] = {}
        self.pending_jobs = 0

    # ------------------------------------------------------------------ clock
    @property
    def now(self) -> float:
        return self._now

    def _hours(self, unix: float) -> float:
        return (unix - self._anchor) / 3600.0

    # ------------------------------------------------------------ internals
    def _log(self, actor: str, kind: str, host: str | None, **detail: Any) -> None:
        self.events.append(RecordEntry(self._now, actor, kind, host, detail))

    def _set_state(
        self, h: HostRec, state: str, actor: str, reason: str = "", **extra: Any
    ) -> None:
        if h.state == state and h.reason == reason:
            return
        self._log(actor, "host_state", h.name, before=h.state, after=state, reason=reason, **extra)
        h.state = state
        h.reason = reason
        self.dirty.add(h.name)

    def _reason(self, owner: str, what: str) -> str:
        return f"{REASON_PREFIX}{owner} {what}"[:250]

    # --------------------------------------------------------------- syncing
    def sync(self) -> None:
        """Read Slurm and reconcile the record with it (see the module docstring)."""
        nodes = {n.name: n for n in self.cmd.nodes()}
        jobs = self.cmd.jobs()
        self.nodes = nodes
        self.jobs = {}
        self.pending_jobs = sum(1 for j in jobs if j.state == "PENDING")
        on_node: dict[str, int] = {}
        for j in jobs:
            if not j.running or not j.nodes:
                continue
            ours = [n for n in j.nodes if n in self.hosts]
            if not ours:
                continue
            self.jobs[j.id] = _Job(
                j,
                self._hours(j.start),
                self._hours(j.end) if j.end > j.start else self._hours(j.start) + 24 * 365,
                declared_checkpoint_hours(j.comment),
            )
            for n in ours:
                on_node.setdefault(n, j.id)
        for name in self.order:
            h = self.hosts[name]
            job = on_node.get(name)
            if h.job_id != job:
                h.job_id = job
                self.dirty.add(name)
            node = nodes.get(name)
            if node is not None:
                self._reconcile(h, node)

    def _held(self, h: HostRec) -> bool:
        return h.state in HELD_STATES and h.owner not in NOT_MAINTENANCE_OWNERS

    def _trainctl_out(self, h: HostRec) -> bool:
        """Quarantined or handed to repair by trainctl (not by someone else in Slurm)."""
        return h.owner in (QUARANTINE_OWNER, REPAIR_OWNER)

    def _reconcile(self, h: HostRec, node: SlurmNode) -> None:
        if self._held(h):
            if not node.out_of_service and self.writable:
                # Held by trainctl, yet Slurm schedules on it: the drain was lost. Drain again.
                self.cmd.drain(h.name, self._reason(h.owner, "maintenance"))
                self._log(SLURM_ACTOR, "redrained", h.name, owner=h.owner, slurm=node.state)
            self._publish(h, node)
            return
        if self._trainctl_out(h) and node.out_of_service:
            self._publish(h, node)  # quarantined or in repair: a person resumes it in Slurm
            return
        m = _REASON_OWNER.match(node.reason)
        if node.drained and m and m.group(1) not in NOT_MAINTENANCE_OWNERS:
            if h.state == S.IN_SERVICE:
                # Drained by trainctl in a session whose record did not commit: the owner its
                # reason names holds it (and hands it back, as it does any orphan).
                h.owner = m.group(1)
                self._set_state(
                    h, S.CORDONED, SLURM_ACTOR, f"maintenance by {h.owner}", owner=h.owner
                )
            return
        if node.state == "unknown" and not node.drained:
            return  # a controller that just restarted has not heard from the node yet
        if node.drained or node.down:
            want = S.IN_REPAIR if node.down and not node.drained else S.QUARANTINED
            what = "drain" if node.drained else node.state
            why = f"slurm {what}" + (f": {node.reason}" if node.reason else "")
            if h.state != want or h.reason != why:
                self._set_state(h, want, SLURM_ACTOR, why, by="slurm")
                h.owner = NO_OWNER
        elif h.state != S.IN_SERVICE:
            h.owner = NO_OWNER
            self._set_state(h, S.IN_SERVICE, SLURM_ACTOR, "resumed in slurm", by="slurm")
        self._publish(h, node)

    def _features(self, h: HostRec, node: SlurmNode) -> list[str]:
        comps = self.config.feature_components
        kept = [f for f in node.features if not any(f.startswith(f"{c}_") for c in comps)]
        return kept + [f"{c}_{h.versions[c]}" for c in comps if c in h.versions]

    def _publish(self, h: HostRec, node: SlurmNode) -> None:
        """Make the node's features say the versions trainctl recorded for it."""
        if not self.writable or not self.config.feature_components:
            return
        want = self._features(h, node)
        if sorted(want) == sorted(node.features):
            return
        self.cmd.set_features(h.name, want)
        self._log(SLURM_ACTOR, "features_applied", h.name, features=want)

    # ------------------------------------------------------------------ reads
    def host_names(self) -> Sequence[str]:
        return self.order

    def host(self, name: str) -> HostRec:
        try:
            return self.hosts[name]
        except KeyError:
            raise UnknownCluster(f"host: unknown host {name!r} in {self.name}") from None

    def job(self, job_id: int) -> JobView | None:
        j = self.jobs.get(job_id)
        return None if j is None else j.view(self._now)

    def out_of_service_count(self) -> int:
        return sum(1 for h in self.hosts.values() if h.state != S.IN_SERVICE)

    def planned_count(self) -> int:
        return sum(1 for h in self.hosts.values() if self._held(h))

    def recorded_targets(self) -> Mapping[str, str]:
        return self.state["targets"]

    def snapshot(self, cycle_started_hours: float | None = None) -> ClusterSnapshot:
        c = cycle_started_hours
        hosts = tuple(
            HostView(
                h.name,
                h.rack,
                h.zone,
                str(h.state),
                h.owner,
                h.job_id,
                c is not None and is_due(h, c),
                h.versions,
                h.last_visit,
            )
            for h in (self.hosts[n] for n in self.order)
        )
        jobs = {jid: j.view(self._now) for jid, j in self.jobs.items()}
        return ClusterSnapshot(
            self.name, self._now, len(hosts), hosts, jobs, dict(self.state["targets"])
        )

    def record(self, actor: str, kind: str, host: str | None, **detail: Any) -> None:
        self._log(actor, kind, host, **detail)

    # ---------------------------------------------------------------- targets
    def set_targets(self, targets: Mapping[str, str], actor: str) -> None:
        merged = {**self.state["targets"], **targets}
        if merged != self.state["targets"]:
            self.state["targets"] = merged
            self._log(actor, "targets", None, targets=merged)

    def unset_targets(self, components: Sequence[str], actor: str) -> None:
        kept = {c: v for c, v in self.state["targets"].items() if c not in components}
        if kept != self.state["targets"]:
            self.state["targets"] = kept
            self._log(actor, "targets", None, targets=kept)

    # ---------------------------------------------------------------- cordons
    def cordon(
        self,
        name: str,
        owner: str,
        actor: str,
        limit: int,
        per_rack: int | None = None,
        per_zone: int | None = None,
        maintenance: int | None = None,
        piggyback: bool = False,
    ) -> bool:
        """Drain ``name`` for ``owner`` if the budget allows it, counting every node out of
        service for any reason, trainctl's or not (an operator's drain included)."""
        h = self.host(name)
        node = self.nodes.get(name)
        if h.state != S.IN_SERVICE or node is None or node.out_of_service:
            return False
        down = [d for d in self.hosts.values() if d.state != S.IN_SERVICE]
        if len(down) + 1 > limit:
            return False
        if maintenance is not None and self.planned_count() + 1 > maintenance:
            return False
        if per_rack is not None and sum(d.rack == h.rack for d in down) + 1 > per_rack:
            return False
        if per_zone is not None and sum(d.zone == h.zone for d in down) + 1 > per_zone:
            return False
        self.cmd.drain(name, self._reason(owner, "maintenance"))
        h.owner, h.verified = owner, False
        self._set_state(
            h,
            S.CORDONED,
            actor,
            f"maintenance by {owner}",
            owner=owner,
            limit=limit,
            per_rack=per_rack,
            per_zone=per_zone,
            **({} if maintenance is None else {"maintenance": maintenance}),
        )
        return True

    def set_piggyback(self, claim: PiggybackClaim | None) -> None:
        """Slurm places jobs itself, the moment a node frees: a standing claim on freed hosts
        cannot be held there, so trains plan each domain as it comes. Its steering can be:
        with ``visited_first``, nodes still due this cycle get ``DUE_WEIGHT`` and visited ones
        the default ``Weight``, so Slurm puts new jobs on visited nodes first and due nodes
        are the ones left idle (Slurm cannot be told to place the longest job first). A
        withdrawn claim puts every weight back. Only changed nodes are updated."""
        due: set[str] = set()
        if claim is not None and claim.visited_first:
            since = claim.cycle_started_hours
            due = {n for n, h in self.hosts.items() if not visited_since(h, since)}
        weighted = set(self.state.get("due_weighted", []))
        if self.writable and due != weighted:
            if due - weighted:
                self.cmd.set_weight(sorted(due - weighted), DUE_WEIGHT)
            if weighted - due:
                self.cmd.set_weight(sorted(weighted - due), DEFAULT_WEIGHT)
            self.state["due_weighted"] = sorted(due)

    def rack_switches(self) -> dict[str, str]:
        """Slurm knows no switch firmware: no rack switch is ever due through this backend."""
        return {}

    def update_switch(self, rack: str, version: str, actor: str) -> str:
        return "rack switches are not managed through the Slurm backend"

    def start_drain(self, name: str, actor: str) -> None:
        h = self.host(name)
        if h.state == S.CORDONED and h.job_id is not None:
            self._set_state(h, S.DRAINING, actor, "waiting for job")

    # ------------------------------------------------------------------- jobs
    def ask_job(self, job_id: int, actor: str, evict_at_hours: float) -> JobAnswer:
        """The job's ``--comment`` answers: ``evict=go|refuse`` says so outright; a job that
        declares ``ckpt=<interval>`` asks to wait for its next checkpoint when that comes
        after the planned eviction; any other job lets maintenance go ahead."""
        j = self.jobs.get(job_id)
        if j is None:
            return JobAnswer("go", reason="not running")
        m = _EVICT.search(j.slurm.comment)
        if m and m.group(1) == "refuse":
            return JobAnswer("refuse", reason="job comment: evict=refuse")
        if m and m.group(1) == "go":
            return JobAnswer("go", reason="job comment: evict=go")
        if j.ckpt_hours is not None:
            nxt = j.view(self._now).next_checkpoint_hours
            if nxt > evict_at_hours + 1e-6:
                return JobAnswer("wait", until_hours=nxt, reason="until its next checkpoint")
        return JobAnswer("go")

    def note_refusal(self, job_id: int, note: RefusalNote) -> None:
        """Kept with the backend's state; stands while Slurm still runs the job."""
        if job_id in self.jobs:
            notes = self.state.setdefault("job_refusals", {})
            notes[str(job_id)] = [note.until_hours, note.refusals]

    def refusal_notes(self) -> dict[int, RefusalNote]:
        notes = self.state.get("job_refusals", {})
        return {
            int(j): RefusalNote(float(v[0]), int(v[1]))
            for j, v in notes.items()
            if int(j) in self.jobs
        }

    def evict(self, job_id: int, actor: str, as_of: float | None = None) -> float:
        """Requeue the job (cancel it only if it cannot be requeued, and say so); the
        GPU-hours of work since its last checkpoint."""
        j = self.jobs.get(job_id)
        if j is None:
            return 0.0
        view = j.view(self._now)
        lost = max(0.0, self._now - view.last_checkpoint_hours) * view.size * GPUS_PER_HOST
        if j.slurm.requeue:
            self.cmd.requeue(job_id)
            how = "requeued"
        else:
            self.cmd.cancel(job_id)
            how = "cancelled: the job cannot be requeued (submitted with --no-requeue)"
        self._log(
            actor,
            "job_interrupted",
            None,
            job=job_id,
            hosts=list(j.slurm.nodes),
            cause=f"maintenance:{actor}",
            how=how,
            lost_gpu_hours=round(lost, 4),
        )
        for n in j.slurm.nodes:
            if n in self.hosts and self.hosts[n].job_id == job_id:
                self.hosts[n].job_id = None
                self.dirty.add(n)
        del self.jobs[job_id]
        return lost

    # ------------------------------------------------------------ maintenance
    def prestage(self, name: str, targets: Mapping[str, str], actor: str) -> list[str]:
        comps = pending_components(self.host(name).versions, targets)
        if comps:
            self._log(actor, "prestaged", name, components={c: targets[c] for c in comps})
        return comps

    def begin_update(self, name: str, actor: str) -> bool:
        h = self.host(name)
        if h.state not in (S.CORDONED, S.DRAINING, S.IN_MAINTENANCE) or h.job_id is not None:
            return False
        self._set_state(h, S.IN_MAINTENANCE, actor, "applying updates")
        return True

    def begin_rollback(self, name: str, actor: str) -> bool:
        h = self.host(name)
        if h.state not in (S.IN_MAINTENANCE, S.VERIFYING) or h.job_id is not None:
            return False
        h.verified = False
        self.dirty.add(name)
        self._set_state(h, S.IN_MAINTENANCE, actor, "rolling back")
        return True

    def _shell(self, command: str) -> tuple[int, str]:
        try:
            done = subprocess.run(
                ["/bin/sh", "-c", command],
                capture_output=True,
                text=True,
                timeout=self.config.command_timeout_seconds,
                check=False,
            )
        except subprocess.TimeoutExpired:
            return EX_TEMPFAIL, f"timed out after {self.config.command_timeout_seconds:g}s"
        text = (done.stdout.strip() or done.stderr.strip()).splitlines()
        return done.returncode, (text[0] if text else "")[:300]

    def install(
        self, name: str, targets: Mapping[str, str], actor: str, attempt: str
    ) -> InstallOutcome:
        """Run each pending component's hook in dependency order, then one reboot."""
        h = self.host(name)
        comps = pending_components(h.versions, targets)
        h.updates += 1
        self.dirty.add(name)
        done: list[str] = []
        for c in comps:
            hook = self.config.hook_for(c)
            if hook is None:
                self._log(
                    actor,
                    "update_failed",
                    name,
                    component=c,
                    permanent=True,
                    reason="no hook for this component in the backend config",
                )
                return self._partial(h, done, targets, actor, InstallOutcome(False, True, c))
            code, out = self._shell(render(hook, node=name, component=c, version=targets[c]))
            if code != 0:
                permanent = code != EX_TEMPFAIL
                self._log(
                    actor,
                    "update_failed",
                    name,
                    component=c,
                    permanent=permanent,
                    reason=out or f"hook exit code {code}",
                )
                return self._partial(h, done, targets, actor, InstallOutcome(False, permanent, c))
            done.append(c)
        self._partial(h, done, targets, actor, InstallOutcome(True, False, None))
        if self.config.reboot and any(PROFILES[c].needs_reboot for c in comps if c in PROFILES):
            self.reboot(name, actor)
        # The hooks ran for real; verification waits for the reboot itself.
        return InstallOutcome(True, False, None, duration_hours=0.0)

    def _partial(
        self,
        h: HostRec,
        done: list[str],
        targets: Mapping[str, str],
        actor: str,
        out: InstallOutcome,
    ) -> InstallOutcome:
        """Record the components whose hook succeeded (a later failure does not undo them)."""
        if done:
            before = {c: h.versions.get(c) for c in done}
            for c in done:
                h.versions[c] = targets[c]
            self._log(actor, "updated", h.name, before=before, after={c: targets[c] for c in done})
        return out

    def reboot(self, name: str, actor: str) -> None:
        self.cmd.reboot(name, self._reason(actor, "reboot"))
        self.state.setdefault("reboots", {})[name] = time.time()  # Unix seconds it was asked
        self._log(actor, "rebooted", name)

    def _wait_reboot(self, name: str) -> str:
        """'' once the node's reboot (if any) is over; else why it is not.

        Over means the node booted after the reboot was asked (its ``boot_time``), answers and
        carries no reboot flag: the flags alone are not enough, since a controller restarted
        meanwhile may have forgotten them (the node then comes back "unexpectedly rebooted",
        down, which is still ours to verify and resume). A request the restarted controller
        lost altogether (no flag, no new boot) is asked again.
        """
        asked = self.state.get("reboots", {}).get(name)
        if asked is None:
            return ""
        deadline = time.monotonic() + REBOOT_WAIT_SECONDS
        while True:
            node = next((n for n in self.cmd.nodes() if n.name == name), None)
            if node is not None and "NOT_RESPONDING" not in node.flags and not node.rebooting:
                if node.boot_time >= asked - 1:
                    self.state["reboots"].pop(name, None)
                    return ""
                if time.time() - asked > REBOOT_REASK_SECONDS:
                    self.cmd.reboot(name, self._reason(self.host(name).owner, "reboot"))
                    self._log(SLURM_ACTOR, "reboot_asked_again", name)
            if time.time() - asked > self.config.reboot_timeout_seconds:
                self.state["reboots"].pop(name, None)
                return f"reboot did not complete within {self.config.reboot_timeout}"
            if time.monotonic() > deadline:
                raise TemporaryError(f"slurm: {name} is still rebooting")
            time.sleep(0.5)

    def health_check(self, name: str, actor: str) -> Verification:
        """The config's health command (none: a node whose slurmd answers is healthy)."""
        node = next((n for n in self.cmd.nodes() if n.name == name), None)
        if node is None or "NOT_RESPONDING" in node.flags:
            v = Verification(False, "slurmd not responding", 0.0)
        elif not self.config.health_command:
            v = Verification(True, "passed", 1.0)
        else:
            code, out = self._shell(render(self.config.health_command, node=name))
            v = Verification(code == 0, "passed" if code == 0 else out or f"exit {code}", 1.0)
        self._log(actor, "health_checked", name, passed=v.passed, reason=v.reason)
        return v

    def change_failure_rate(self, components: Iterable[str]) -> float:
        return 0.0

    def verify(self, name: str, targets: Mapping[str, str], actor: str) -> Verification:
        """Reboot finished, health command passed, record on ``targets``."""
        h = self.host(name)
        self._set_state(h, S.VERIFYING, actor, "verifying")
        why = self._wait_reboot(name)
        if why:
            v = Verification(False, why, 0.0)
        else:
            v = self.health_check(name, actor)
            wrong = sorted(c for c, ver in targets.items() if h.versions.get(c) != ver)
            if v.passed and wrong:
                v = Verification(False, "version manifest mismatch: " + ",".join(wrong), 1.0)
        h.verified = v.passed
        self.dirty.add(name)
        self._log(actor, "verified", name, passed=v.passed, reason=v.reason, bus_bw=v.bus_bw)
        return v

    def _resume(self, h: HostRec) -> None:
        self.cmd.resume(h.name)
        node = self.nodes.get(h.name)
        if node is not None:
            self._publish(h, node)

    def return_to_service(self, name: str, actor: str, visit: bool = True) -> bool:
        h = self.host(name)
        if not h.verified or h.state != S.VERIFYING:
            return False
        self._resume(h)
        h.owner = NO_OWNER
        if visit:
            h.last_visit = self._now
        self._set_state(h, S.IN_SERVICE, actor, "returned after verification", verified=True)
        return True

    def release(self, name: str, actor: str) -> None:
        h = self.host(name)
        if h.state in UNTOUCHED_STATES and h.owner != REPAIR_OWNER:
            self._resume(h)
            h.owner = NO_OWNER
            self._set_state(h, S.IN_SERVICE, actor, "released untouched", verified=True)

    def quarantine(self, name: str, actor: str, reason: str) -> None:
        """Keep the node drained with trainctl's reason until a person triages it."""
        h = self.host(name)
        if h.state in (S.IN_REPAIR, S.QUARANTINED):
            return
        if h.job_id is not None and h.job_id in self.jobs:
            self.evict(h.job_id, actor)
        self.cmd.drain(name, self._reason(QUARANTINE_OWNER, reason))
        h.owner = QUARANTINE_OWNER
        self._set_state(h, S.QUARANTINED, actor, reason)

    def set_reimage(self, name: str, versions: dict[str, str], actor: str) -> bool:
        """People repair Slurm nodes (and image them); trainctl cannot choose the image."""
        return False

    def reclaim(self, name: str, actor: str, reason: str) -> bool:
        """A node trainctl quarantined after a bad build stays drained, now held by ``actor``
        (its reason says so) to roll it back; a node in repair is left to the people on it."""
        h = self.host(name)
        if h.state != S.QUARANTINED or h.job_id is not None:
            return False
        self.cmd.drain(name, self._reason(actor, reason))
        h.owner = actor
        self._set_state(h, S.IN_MAINTENANCE, actor, reason, owner=actor, reclaimed=True)
        return True

    def hand_to_repair(self, name: str, actor: str, reason: str) -> None:
        h = self.host(name)
        if h.state == S.IN_REPAIR:
            return
        if h.job_id is not None and h.job_id in self.jobs:
            self.evict(h.job_id, actor)
        self.cmd.drain(name, self._reason(REPAIR_OWNER, reason))
        h.owner, h.verified = REPAIR_OWNER, False
        self._set_state(h, S.IN_REPAIR, actor, reason)

    def close_owner(self, owner: str, actor: str, outcome: str = "") -> None:
        if outcome:
            self._log(actor, "owner_closed", None, owner=owner, outcome=outcome)
        else:
            self._log(actor, "owner_closed", None, owner=owner)

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


__all__ = ["SlurmCluster", "SlurmRefused", "declared_checkpoint_hours"]
