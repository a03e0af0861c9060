"""The simulated cluster's job scheduler: trace draws, gang placement, backfill, job end and stop.

``JobScheduler`` keeps the cluster busy the way a batch scheduler would: it draws jobs from the
seeded trace (``dynamics.draw_job``) while fewer hosts than the target utilisation are busy,
gang-places each on idle in-service hosts of one (gpu_driver, cuda) version as close together as
it can, backfills smaller jobs unless the head of the queue has waited past
``RESERVE_AFTER_HOURS``, and ends or interrupts (requeues) jobs. While a job-aware train's
claim steers it (``sim_piggyback``), it fills hosts visited this cycle before due ones. It is
separate from failures and maintenance, which only call ``_interrupt`` to stop a job; what it
places depends only on host states (and the claim), so it needs to know nothing of why a host
is out.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from itertools import repeat
from operator import attrgetter, itemgetter

from orchestrator.contracts.models import GPUS_PER_HOST, HostState
from orchestrator.fleet import dynamics as dyn
from orchestrator.fleet.sim_core import SimCore
from orchestrator.fleet.sim_records import JobRec

S = HostState
_SIZE = attrgetter("size")
_NAME, _RACK, _LAST = attrgetter("name"), attrgetter("rack"), attrgetter("last_visit")
_VERSIONS, _UPPER = attrgetter("versions"), itemgetter("gpu_driver", "cuda")
_INF = float("inf")
RESERVE_AFTER_HOURS = 6.0
QUEUE_DEPTH_EASY = 64


class JobScheduler(SimCore):
    """Jobs of one cluster: drawn from the trace, placed, ended and interrupted.

    Two modes the simulator's fixed-horizon runs turn on (``simulate --horizon``), and a live
    fleet built with ``scheduler="easy"`` (``use_easy``; every other run keeps the defaults, so
    their schedules are unchanged):

    - ``easy_backfill``: EASY backfill as Slurm's ``sched/backfill`` does it. The first job of
      the queue that does not fit gets a reservation at the earliest instant enough hosts come
      free by the running jobs' time limits (their ends); a later job starts ahead of it only if
      it ends, by its own time limit, before that instant, or fits in the hosts the reservation
      leaves over then.
    - ``restart_base_hours`` / ``restart_per_host_hours``: a requeued job restarts (reschedule,
      initialise, load the checkpoint, NCCL set-up) for ``base + per_host * hosts`` hours before
      it makes progress again; its ``start`` is when progress resumes, so its checkpoints and
      end are counted from there.
    """

    easy_backfill: bool = False
    restart_base_hours: float = 0.0
    restart_per_host_hours: float = 0.0

    def use_easy(self, restart_base_hours: float, restart_per_host_hours: float = 0.0) -> None:
        """The scheduler ``simulate --horizon`` judges: EASY backfill, and a requeued job
        restarting for ``base + per_host x hosts`` hours."""
        self.easy_backfill = True
        self.restart_base_hours = restart_base_hours
        self.restart_per_host_hours = restart_per_host_hours

    def restart_hours(self, job: JobRec) -> float:
        """The restart a requeued ``job`` pays before it makes progress again."""
        return self.restart_base_hours + self.restart_per_host_hours * job.size

    def _restarts(self) -> dict[int, float]:
        """Job id -> the restart phase of its current run (fleet hours)."""
        table: dict[int, float] | None = self.__dict__.get("_restart_phase")
        if table is None:
            table = self.__dict__["_restart_phase"] = {}
        return table

    def _finish_job(self, job: JobRec) -> None:
        job.state = "done"
        if self.restart_base_hours > 0:
            self._restarts().pop(job.id, None)
        self.dirty_jobs.add(job.id)
        self._log("scheduler", "job_end", None, job=job.id, hosts=len(job.hosts))
        self._release(job)

    def _release(self, job: JobRec) -> None:
        if self.state.job_refusals:  # a refusal stands only while the job runs
            self.state.job_refusals.pop(str(job.id), None)
        hosts = self.hosts
        mine = [hosts[name] for name in job.hosts if hosts[name].job_id == job.id]
        self._index.set_job_id(mine, None)
        names = [h.name for h in mine]
        self.dirty_hosts.update(names)
        self.freed.extend(names)

    def _before_placing(self) -> None:
        """A hook run before placing: maintenance may take freed hosts first (piggybacking)."""
        self.freed.clear()

    def _interrupt(self, job: JobRec, cause: str, actor: str) -> float:
        """Stop a running job; it loses the work since its last checkpoint and is requeued."""
        at = self.now
        assert job.start is not None
        extra: dict[str, float] = {}
        phase = self._restarts().pop(job.id, None) if self.restart_base_hours > 0 else None
        if phase is not None:
            # Stopped while restarting: no progress yet, the restart so far is what it paid.
            began = job.start - phase
            spent = min(max(0.0, at - began), phase)
            extra["restart_gpu_hours"] = round(spent * job.size * GPUS_PER_HOST, 3)
            at = max(at, job.start)
        ckpt = job.last_checkpoint(at)
        lost = (at - ckpt) * job.size * GPUS_PER_HOST
        self._log(
            actor,
            "job_interrupted",
            None,
            job=job.id,
            cause=cause,
            hosts=len(job.hosts),
            lost_gpu_hours=round(lost, 3),
            **extra,
        )
        self._release(job)
        job.work_hours = max(0.01, job.work_hours - (ckpt - job.start))
        job.state, job.start, job.hosts = "queued", None, []
        job.interruptions += 1
        self.state.queue.insert(0, job.id)
        self.dirty_jobs.add(job.id)
        return lost

    def _visited_first_since(self) -> float | None:
        """When set (a hook a train's claim fills in): the start of the cycle whose visited
        hosts new jobs go to first, keeping the hosts still due idle for maintenance."""
        return None

    def _free_hosts(self, since: float | None) -> dict[tuple[str, str], list[dict[str, list[str]]]]:
        """Idle in-service hosts grouped by (gpu_driver, cuda), then in tiers the scheduler
        fills in order (one tier; or, steered by a claim for the cycle begun at ``since``,
        visited then due hosts), then by rack (inventory order)."""
        tiers = 1 if since is None else 2
        free: dict[tuple[str, str], list[dict[str, list[str]]]] = {}
        index = self._index
        # Inventory order, each host's fields read at C speed: this runs at every placing.
        idle = list(map(index.recs.__getitem__, sorted(map(index.pos.__getitem__, index.free))))
        keys = map(_UPPER, map(_VERSIONS, idle))
        if since is None:
            tier_of: Iterable[int] = repeat(0)
        else:  # ``is_due``: an idle host is in service, so due = not visited since
            tier_of = [0 if last is not None and last >= since else 1 for last in map(_LAST, idle)]
        columns = zip(map(_NAME, idle), map(_RACK, idle), keys, tier_of, strict=False)  # repeat
        for name, rack, key, tier in columns:
            groups = free.get(key)
            if groups is None:
                groups = free[key] = [defaultdict(list) for _ in range(tiers)]
            groups[tier][rack].append(name)
        return free

    def _fill_and_place(self) -> None:
        """Keep the cluster busy: draw jobs from the trace while below target, place what fits.

        Which jobs start now is decided first, on host counts alone (round after round, as
        jobs are drawn and the queue's head may reserve hosts), then they get their hosts all
        together: in that order, or under a steering claim the longest first (``_assign``)."""
        if self.freed:
            self._before_placing()
        goal = self.target_utilisation * len(self.order)
        busy, idle = self._index.busy, len(self._index.free)
        since = self._visited_first_since()
        free: dict[tuple[str, str], list[dict[str, list[str]]]] | None = None
        counts: dict[tuple[str, str], int] = {}
        starting: list[tuple[JobRec, tuple[str, str]]] = []
        while True:
            if busy < goal:
                self._draw_jobs()
            if not self.state.queue or (self.easy_backfill and busy >= goal):
                break  # (EASY starts nothing past the target: see ``_fits_easy``)
            head = self.jobs[self.state.queue[0]]
            # Backfill smaller jobs, but hold hosts for a head job that has waited too long.
            window = 1 if self.now - head.submitted > RESERVE_AFTER_HOURS else 16
            if self.easy_backfill:  # the head's reservation is kept by ``_fits_easy``
                window = len(self.state.queue)
            # When not even the smallest job of the window fits in all idle hosts, nothing can
            # be placed (what the counts would find key by key, at every step of the clock).
            # (Sizes read at C speed: this runs at every step of the clock, over 64 jobs.)
            jobs = map(self.jobs.__getitem__, self.state.queue[:window])
            if idle < min(map(_SIZE, jobs)):
                break
            if self.easy_backfill and head.size > idle:
                # Past the head, a job starts only within the room below the target.
                within = min(idle, goal - busy)
                rest = map(self.jobs.__getitem__, self.state.queue[1:])
                if min(map(_SIZE, rest), default=_INF) > within:
                    break
            if free is None:
                free = self._free_hosts(since)
                counts = {k: sum(sum(map(len, t.values())) for t in ts) for k, ts in free.items()}
            if self.easy_backfill:
                placed = self._fits_easy(self.state.queue, counts, starting, goal - busy)
            else:
                placed = self._fits(self.state.queue[:window], counts)
            for job, _ in placed:
                self.state.queue.remove(job.id)
                busy += job.size
                idle -= job.size
            starting.extend(placed)
            if not placed:
                break
        if starting:
            assert free is not None
            self._assign(starting, free, steered=since is not None)

    def _draw_jobs(self) -> None:
        """Queue jobs drawn from the seeded trace until the queue is as deep as it may be."""
        while len(self.state.queue) < self._queue_depth():
            shape = dyn.draw_job(self.seed, self.name, self.state.job_seq, self.max_job_hosts)
            job_id = self.state.job_seq
            self.state.job_seq += 1
            self.jobs[job_id] = JobRec(
                job_id,
                shape.hosts,
                shape.duration_hours,
                shape.checkpoint_interval_hours,
                self.now,
            )
            self.dirty_jobs.add(job_id)
            self.state.queue.append(job_id)

    def _take_close(self, racks: dict[str, list[str]], need: int, chosen: list[str]) -> None:
        """Move up to ``need`` hosts from ``racks`` to ``chosen``: zones that hold them all
        first, the smallest of those first, then the others, smallest first; in each zone its
        fullest racks first."""
        by_zone: dict[str, list[str]] = defaultdict(list)
        for rack, names in racks.items():
            if names:
                by_zone[self.hosts[names[0]].zone].append(rack)
        zone_free = {z: sum(len(racks[r]) for r in rs) for z, rs in by_zone.items()}
        zones = sorted(zone_free, key=lambda z: (zone_free[z] < need, zone_free[z], z))
        goal = len(chosen) + need
        for zone in zones:
            for rack in sorted(by_zone[zone], key=lambda r: (-len(racks[r]), r)):
                take = racks[rack][: goal - len(chosen)]
                del racks[rack][: len(take)]
                chosen.extend(take)
                if len(chosen) == goal:
                    return

    def _fits(
        self, queue: list[int], counts: dict[tuple[str, str], int]
    ) -> list[tuple[JobRec, tuple[str, str]]]:
        """The jobs of ``queue`` that fit, in its order, each on the (driver, cuda) version with
        the most idle hosts that holds it (``counts`` is what is left)."""
        placed: list[tuple[JobRec, tuple[str, str]]] = []
        for job_id in queue:
            job = self.jobs[job_id]
            fits = [(c, key) for key, c in counts.items() if c >= job.size]
            if fits:
                _, key = max(fits)
                counts[key] -= job.size
                placed.append((job, key))
        return placed

    def _fits_easy(
        self,
        queue: list[int],
        counts: dict[tuple[str, str], int],
        starting: list[tuple[JobRec, tuple[str, str]]],
        room: float,
    ) -> list[tuple[JobRec, tuple[str, str]]]:
        """EASY backfill (see the class docstring): the jobs of ``queue`` that start now. Past
        the head of the queue, a job starts only within ``room`` (hosts below the target
        utilisation): the trace is demand at that target, not a backlog to empty at once."""
        placed: list[tuple[JobRec, tuple[str, str]]] = []
        shadow: float | None = None
        extra = 0
        for i, job_id in enumerate(queue):
            job = self.jobs[job_id]
            if job.size > room and (i > 0 or room <= 0):
                if shadow is None:
                    break  # FIFO up to here; what follows waits for room
                continue
            fits = [(c, key) for key, c in counts.items() if c >= job.size]
            if shadow is None:
                if fits:
                    _, key = max(fits)
                    counts[key] -= job.size
                    room -= job.size
                    placed.append((job, key))
                    continue
                shadow, extra = self._reservation(job, sum(counts.values()), [*starting, *placed])
                continue
            if not fits:
                continue
            ends = self.now + self._next_restart(job) + job.work_hours
            if ends <= shadow or job.size <= extra:
                if ends > shadow:
                    extra -= job.size
                _, key = max(fits)
                counts[key] -= job.size
                room -= job.size
                placed.append((job, key))
        return placed

    def _queue_depth(self) -> int:
        """Jobs waiting at most: 8; EASY backfill sees a deeper queue (``QUEUE_DEPTH_EASY``), as
        a batch scheduler's, so a head waiting for its reservation does not stop the draws."""
        return QUEUE_DEPTH_EASY if self.easy_backfill else 8

    def _next_restart(self, job: JobRec) -> float:
        return self.restart_hours(job) if job.interruptions and self.restart_base_hours > 0 else 0.0

    def _reservation(
        self, head: JobRec, idle: int, starting: list[tuple[JobRec, tuple[str, str]]]
    ) -> tuple[float, int]:
        """When ``head`` can start by the running (and ``starting``) jobs' time limits, and the
        hosts left over then: (inf, 0) if it never fits in the hosts in service."""
        ends = sorted(
            [(j.end, j.size) for j in self._index.running.values() if j.start is not None]
            + [(self.now + self._next_restart(j) + j.work_hours, j.size) for j, _ in starting]
        )
        avail = idle
        for end, size in ends:
            avail += size
            if avail >= head.size:
                return end, avail - head.size
        return float("inf"), 0

    def _assign(
        self,
        starting: list[tuple[JobRec, tuple[str, str]]],
        free: dict[tuple[str, str], list[dict[str, list[str]]]],
        steered: bool,
    ) -> None:
        """Give each starting job its hosts: in the order they were chosen, or, when a train
        steers jobs, the longest job first (by its remaining work, what a batch
        scheduler knows as its time limit), so the jobs that would outlive the cycle get the
        visited hosts and the short ones, which free theirs by themselves, the due ones."""
        if steered:
            starting = sorted(starting, key=lambda p: (-p[0].work_hours, p[0].id))
        for job, key in starting:
            self._place(job, key, free[key])

    def _place(self, job: JobRec, key: tuple[str, str], tiers: list[dict[str, list[str]]]) -> None:
        """Gang-place a job on idle hosts of version ``key``, tier by tier, each tier's hosts
        as close together as possible."""
        chosen: list[str] = []
        for racks in tiers:
            self._take_close(racks, job.size - len(chosen), chosen)
            if len(chosen) == job.size:
                break
        start, extra = self.now, dict[str, float]()
        if self.restart_base_hours > 0 and job.interruptions:
            phase = self.restart_hours(job)
            start += phase
            self._restarts()[job.id] = phase
            extra["restart_hours"] = round(phase, 6)
        job.hosts, job.start, job.state = chosen, start, "running"
        job.driver, job.cuda = key
        hosts = self.hosts
        self._index.set_job_id([hosts[name] for name in chosen], job.id)
        self.dirty_hosts.update(chosen)
        self.dirty_jobs.add(job.id)
        self._log(
            "scheduler",
            "job_start",
            None,
            job=job.id,
            hosts=chosen,
            gpu_driver=key[0],
            cuda=key[1],
            **extra,
        )
