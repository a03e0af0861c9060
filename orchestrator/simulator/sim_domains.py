"""The simulator's maintenance domains: ``DomainMaintenance`` in virtual fleet time.

A domain interprets the one drain sequence (``execution.drain_sequence``) as the live domain
does, calling the backend itself instead of activities: ``Look`` reads ``drain_status``,
``Ask``/``Evict``/``Release`` ask, evict and hand back at once, ``Install`` starts a batch
(``maintain_steps``: quarantine what failed, then the batch is verified and settled at the
instant its install is over), and a ``WaitUntil`` puts the domain's next look on the engine's
heap. A rack visit holds its drained hosts for the rack switch, as the live domain does.

A mixin of ``engine.Engine``, which provides the cluster, the heap and the figures.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from orchestrator.contracts.models import HostState
from orchestrator.contracts.updates import host_targets, maintenance_hours, pending_components
from orchestrator.execution import drain_sequence as ds
from orchestrator.execution.drain import ask_jobs, drain_status, evict_jobs
from orchestrator.execution.halting import BadBuildRule, Counters, HaltRule
from orchestrator.execution.install import install_hosts
from orchestrator.execution.settle import (
    hand_back,
    quarantine_hosts,
    settle_hosts,
    verify_hosts,
)
from orchestrator.execution.switches import (
    SWITCH_ATTEMPTS,
    SWITCH_RETRY_HOURS,
    update_rack_switches,
)
from orchestrator.fleet.cluster_sim import ClusterSim
from orchestrator.planning.cost import usable_hosts
from orchestrator.simulator.config import SimConfig
from orchestrator.simulator.goodput import Goodput
from orchestrator.simulator.horizon import HorizonLog
from orchestrator.simulator.policies import PolicySpec
from orchestrator.simulator.tally import Tally

ACTOR = "sim-train"


@dataclass
class Batch:
    """Hosts of a domain installed together, verified together once the install time passed."""

    hosts: list[str]
    token: int
    targets: dict[str, str] | None = None


@dataclass
class Domain:
    """One ``DomainMaintenance``: its drain (``seq``: the hosts still draining), batches in
    maintenance."""

    id: int
    hosts: list[str]
    seq: ds.DrainSequence
    batches: dict[int, Batch] = field(default_factory=dict)
    wake_token: int = 0
    #: rack visits: drained hosts at the rack switch (``seq.drained``: waiting for the rack)
    drained: list[str] = field(default_factory=list)
    switch_tries: int = 0

    @property
    def pending(self) -> list[str]:
        return self.seq.pending

    def waiting_hosts(self) -> list[str]:
        """Hosts still draining or drained, waiting for the rest of their rack or its switch."""
        return [*self.seq.pending, *self.seq.drained, *self.drained]


class DomainSteps:
    """The domains of ``Engine``; the state and the calls below come from it."""

    sim: ClusterSim
    cfg: SimConfig
    spec: PolicySpec
    domains: dict[int, Domain]
    tally: Tally
    horizon: HorizonLog | None
    goodput: Goodput | None
    halt_rule: HaltRule | BadBuildRule
    halt_counts: Counters
    halted: str | None
    wake: bool
    cycle_started: float
    _tx: Callable[[], ClusterSim]
    _absorb: Callable[[], None]
    _token: Callable[[], int]
    _push: Callable[..., None]

    def _look(self, d: Domain) -> None:
        """``DomainMaintenance``'s drain at one instant: interpret the sequence's commands
        until it waits (its next look goes on the heap) or nothing is left draining."""
        while True:
            cmd = d.seq.next()
            if isinstance(cmd, ds.Look):
                st = drain_status(
                    self._tx(),
                    ACTOR,
                    cmd.hosts,
                    cmd.deadline_hours,
                    self.cfg.policy,
                    self.cfg.cycle_target_hours,
                )
                d.seq.looked(st)
            elif isinstance(cmd, ds.Install):
                if d.seq.together:  # a rack visit: the switch first, now that all are drained
                    d.drained = cmd.hosts
                    self._switch(d.id, 0)
                else:
                    self._maintain(d, cmd.hosts)
            elif isinstance(cmd, ds.Release):  # refused: back untouched, asked again later
                hand_back(self._tx(), ACTOR, cmd.hosts, {}, visit=False)
                for host in cmd.hosts:
                    d.hosts.remove(host)
                self.tally.released += len(cmd.hosts)
                self.wake = True  # as the live domain tells its train: room to plan again
                self._absorb()
            elif isinstance(cmd, ds.Evict):
                evict_jobs(self._tx(), ACTOR, cmd.job_ids)
                self._absorb()
            elif isinstance(cmd, ds.Ask):
                asked = ask_jobs(
                    self._tx(),
                    ACTOR,
                    cmd.planned,
                    cmd.deadline_hours,
                    cmd.max_refusals,
                    cmd.refusals,
                    cmd.finals,
                    cmd.release,
                )
                d.seq.heard(cmd, asked)
                self._absorb()
            elif isinstance(cmd, ds.WaitUntil):
                d.wake_token = self._token()
                self._push(cmd.at_hours, "drain", d.id, d.wake_token)
                break
            else:
                break
        self._end_if_done(d)

    def _switch(self, domain_id: int, token: int) -> None:
        """``DomainMaintenance._update_switches``: update the drained rack's switch, then (its
        install and reboot waited out) maintain its hosts; retried a few times if refused."""
        d = self.domains.get(domain_id)
        if d is None or not d.drained:
            return
        if token == 1:  # the switch's install and reboot are over
            hosts, d.drained = d.drained, []
            self._maintain(d, hosts)
            self._end_if_done(d)
            return
        sw = update_rack_switches(self._tx(), ACTOR, d.drained, self.cfg.targets["switch_firmware"])
        self._absorb()
        if sw.done or d.switch_tries + 1 >= SWITCH_ATTEMPTS:
            if not sw.done:  # as the live domain: its hosts get their own updates only
                d.drained, hosts = [], d.drained
                self._maintain(d, hosts, switch=False)
                self._end_if_done(d)
                return
            self._push(self.sim.now + sw.duration_hours, "switch", d.id, 1)
            return
        d.switch_tries += 1
        self._push(self.sim.now + SWITCH_RETRY_HOURS, "switch", d.id, 0)

    def _maintain(self, d: Domain, hosts: list[str], switch: bool = True) -> None:
        """``DomainMaintenance._maintain``: install now, verify when the install time passed
        (``switch`` False: a rack switch that could not be updated is not checked)."""
        sim, cfg = self.sim, self.cfg
        targets = cfg.targets if switch else host_targets(cfg.targets)
        if self.horizon is not None:
            wanted = host_targets(targets)
            need = {
                h: maintenance_hours(pending_components(sim.hosts[h].versions, wanted))
                for h in hosts
            }
        upd = install_hosts(self._tx(), ACTOR, {h: targets for h in hosts})
        if self.horizon is not None:
            self.horizon.work_host_hours += sum(need[h] for h in upd.updated)
        at = sim.now
        for step in ds.maintain_steps(upd):
            if isinstance(step, ds.Quarantine):
                # As the live domain does: each host with why its update failed.
                whys = {h: step.reasons.get(h) or step.reason for h in step.hosts}
                q = quarantine_hosts(sim, ACTOR, whys)
                self._quarantined(list(q.quarantined))
                self._count([False] * len(q.quarantined))
            elif isinstance(step, ds.WaitUntil):
                at = step.at_hours
            elif isinstance(step, ds.Verify):  # at the instant the install is over
                token = self._token()
                d.batches[token] = Batch(step.hosts, token, targets)
                self._push(at, "done", d.id, token)

    def _batch_done(self, domain_id: int, token: int) -> None:
        """Verify a batch whose install time passed; settle it."""
        d = self.domains.get(domain_id)
        if d is None or token not in d.batches:
            return
        batch = d.batches.pop(token)
        sim, cfg = self.sim, self.cfg
        ver = verify_hosts(self._tx(), ACTOR, batch.hosts, batch.targets or cfg.targets)
        settled = settle_hosts(sim, ACTOR, ver.passed, ver.failed, visit=True)
        self._returned(settled.returned)
        self._quarantined(list(settled.quarantined))
        outcomes = [h in ver.passed for h in sorted([*ver.passed, *ver.failed])]
        self._count(outcomes)
        self._end_if_done(d)

    def _end_if_done(self, d: Domain) -> None:
        if d.pending or d.batches or d.drained or d.seq.drained:
            return
        del self.domains[d.id]
        self.wake = True  # the child ended: the train looks again
        self.sim.advance(self.sim.now)  # the scheduler sees returned hosts before the train
        self._absorb()

    def _accrue_goodput(self, dt: float) -> None:
        """The train's hosts over ``dt``: installing or verifying (the work; hidden in idle
        when no queued job could have used them), and held idle in a draining domain."""
        hosts = self.sim.hosts
        working = sum(len(b.hosts) for d in self.domains.values() for b in d.batches.values())
        idle_waiting = sum(
            1
            for d in self.domains.values()
            for name in d.waiting_hosts()
            if hosts[name].job_id is None and hosts[name].owner == ACTOR
        )
        # Given back, they would run what the queue holds that fits (``cost.usable_hosts``).
        sim = self.sim
        room = max(0.0, sim.target_utilisation * len(sim.order) - sim._index.busy)
        usable = usable_hosts(
            working + idle_waiting,
            len(sim._index.free),
            (sim.jobs[j].size for j in sim.state.queue),
            room,
        )
        assert self.goodput is not None
        self.goodput.accrue(dt, working, working - min(float(working), usable))
        self.goodput.cost.hold(ACTOR, dt, working, idle_waiting, usable)

    def _count(self, outcomes: list[bool]) -> None:
        """``ClusterTrain._count_outcomes``: outcomes into the halting rule; the train wakes."""
        why = self.halt_rule.fold(self.halt_counts, outcomes)
        if why is not None and self.halted is None:
            self.halted = why
        self.wake = True

    def _returned(self, hosts: list[str]) -> None:
        self.tally.returned(hosts, self.sim.now - self.cycle_started)
        if self.horizon is not None:
            self.horizon.visited(hosts, self.sim.now)
        if hosts:
            self.sim.advance(self.sim.now)
            self._absorb()

    def _quarantined(self, hosts: list[str]) -> None:
        for name in hosts:
            if self.sim.hosts[name].state == HostState.QUARANTINED:
                self.tally.quarantined.add(name)
        self._absorb()
