"""Failure piggybacking by a live train on the real dev server, as the simulator does it (issue 13).

The fleet is the real SQLite fleet at one fleet hour per wall second; a host of a running job
fails the way the fleet's failure process fails one (the job is interrupted and requeued, the host
goes to repair, the scheduler then places jobs), and the train's standing claim takes the job's
other due hosts before the scheduler reuses them.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

from orchestrator.contracts.constants import HELD_STATES, PIGGYBACK_NOTE, REPAIR_OWNER
from orchestrator.contracts.models import HostState
from orchestrator.contracts.train_types import ControlRequest
from orchestrator.contracts.views import is_due
from orchestrator.fleet import SqliteFleet
from tests.e2e import wait_for
from tests.test_train_e2e import OWNER, SPEED, assert_nothing_stranded, events, running_train
from tests.train_helpers import make_fleet, spec
from workflows.cluster_train import ClusterTrain

S = HostState


#: The train's limits in this test: domain (and maintenance budget) and the availability floor.
DOMAIN, FLOOR = 12, 16
#: A failed host is repaired in this many fleet hours (seconds here), so failures never fill
#: the floor for long: a failure while the floor is full could give the claim nothing.
REPAIR_HOURS = 3.0


def _fail_a_job_host(path: Path) -> int | None:
    """Fail one host of the largest running job with due hosts, as the fleet's failure process
    does (``RepairPipeline._failure`` on a drawn host); the job it interrupted, if any. Only
    when the claim has room for the freed hosts (the train holds fewer than its domain and the
    floor has room after the failure): otherwise the failure could not be piggybacked on."""
    fleet = SqliteFleet(path)
    try:
        with fleet.cluster("c00") as sim:
            claim = sim.state.piggyback
            if not claim:
                return None
            held = sum(1 for h in sim.hosts.values() if h.owner == OWNER and h.state in HELD_STATES)
            if held >= DOMAIN or sim.out_of_service_count() + 2 > FLOOR:
                return None
            started = float(claim["cycle_started_hours"])  # type: ignore[arg-type]
            jobs = [
                j
                for j in sim.jobs.values()
                if j.state == "running"
                and len(j.hosts) >= 2
                and sum(is_due(sim.hosts[n], started) for n in j.hosts) >= 2
            ]
            if not jobs:
                return None
            job = max(jobs, key=lambda j: (len(j.hosts), -j.id))
            h = sim.hosts[job.hosts[0]]
            sim._log("fleet", "failure", h.name, cause="test_gpu", repair_hours=REPAIR_HOURS)
            sim._interrupt(job, cause="failure:test_gpu", actor="fleet")
            h.repair_until, h.owner, h.verified = sim.now + REPAIR_HOURS, REPAIR_OWNER, False
            sim._set_state(h, S.IN_REPAIR, "fleet", "test_gpu")
            sim._fill_and_place()  # what the fleet does after every failure
            return job.id
    finally:
        fleet.close()


def _piggybacked(path: Path) -> dict[str, int]:
    """Host -> event seq of each cordon the fleet made for the train's piggyback claim."""
    return {
        str(ev.host): seq
        for seq, ev in events(path)
        if ev.kind == "host_state"
        and ev.detail.get("after") == "cordoned"
        and ev.detail.get("piggyback")
        and ev.detail.get("owner") == OWNER
    }


async def test_live_train_piggybacks_on_a_failed_jobs_hosts(dev_env, tmp_home, task_queue):
    """A live train takes the due hosts a failure freed, visits them, and the failed job is
    never interrupted by maintenance for them: the interruption was the failure's."""
    path = make_fleet(tmp_home, SPEED / 10)  # a fleet hour per wall second: the train's poll
    train_spec = spec(
        domain_size=DOMAIN,
        budget={"max_unavailable": FLOOR, "maintenance": DOMAIN},
        policy="job-aware",
    )
    failed_jobs: list[int] = []
    async with running_train(dev_env, path, task_queue, train_spec) as handle:
        for _ in range(200):  # a failure finds room only while the domain is not full
            job = _fail_a_job_host(path)
            if job is not None:
                failed_jobs.append(job)
            if _piggybacked(path):
                break
            await asyncio.sleep(0.3)
        taken = _piggybacked(path)
        assert taken, f"no piggyback after {len(failed_jobs)} failures"

        def visited() -> bool:
            back = {
                str(ev.host)
                for _, ev in events(path)
                if ev.kind == "host_state"
                and ev.actor == OWNER
                and ev.detail.get("before") == "verifying"
                and ev.detail.get("after") == "in_service"
            }
            return set(taken) <= back

        await wait_for(visited, "the piggybacked hosts visited", timeout=120)
        status = await handle.query(ClusterTrain.status)
        assert status.maintenance_hosts == DOMAIN and status.max_unavailable_hosts == FLOOR
        await handle.execute_update(ClusterTrain.stop, ControlRequest())
        assert (await asyncio.wait_for(handle.result(), 60)).state == "stopped"

    log = events(path)
    returned: dict[str, int] = {}
    for seq, ev in log:
        if ev.host in taken and seq == taken[ev.host]:
            assert PIGGYBACK_NOTE in str(ev.detail.get("reason"))
        if (
            ev.host in taken
            and ev.kind == "host_state"
            and ev.detail.get("before") == "verifying"
            and ev.host not in returned
        ):
            returned[str(ev.host)] = seq
    # Between its piggyback cordon and its return no maintenance eviction touched a piggybacked
    # host: it was idle when taken, so visiting it interrupted nothing.
    job_hosts: dict[int, set[str]] = {}
    for seq, ev in log:
        if ev.kind == "job_start":
            job_hosts[int(ev.detail["job"])] = set(ev.detail["hosts"])
        elif ev.kind == "job_interrupted" and str(ev.detail.get("cause")).startswith("maintenance"):
            hit = {
                h
                for h in job_hosts.get(int(ev.detail["job"]), set())
                if h in taken and taken[h] < seq < returned.get(h, 10**12)
            }
            assert not hit, f"seq {seq}: a maintenance eviction hit piggybacked {sorted(hit)}"
    assert_nothing_stranded(path)
