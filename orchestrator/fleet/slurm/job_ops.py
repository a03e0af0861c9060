"""Job control on Slurm: what a running job answers before maintenance, and its eviction.

Slurm has no way to ask a job whether it may stop now; trainctl reads the job's ``--comment``
instead (one grammar, ``contracts.job_comment``: ``evict=go|wait|refuse``, ``ckpt=<interval>``),
keeps a job's refusals with the backend state while Slurm still runs it, and evicts with
``scontrol requeue`` (``scancel`` only for a job that cannot be requeued, recorded as such),
counting the work lost since its last checkpoint.
"""

from __future__ import annotations

from collections.abc import Mapping

from orchestrator.contracts.backend import JobAnswer, RefusalNote
from orchestrator.contracts.job_comment import parse_job_comment
from orchestrator.contracts.models import GPUS_PER_HOST
from orchestrator.contracts.views import JobView
from orchestrator.fleet.slurm.core import SlurmCore


class JobOps(SlurmCore):
    """The job side of the ``ClusterBackend`` Protocol: ask, note refusals, evict."""

    def ask_job(self, job_id: int, actor: str, evict_at_hours: float) -> JobAnswer:
        """The job's ``--comment`` answers: ``evict=go|refuse`` says so outright, ``evict=wait``
        waits for its next checkpoint (its end without ``ckpt=``); a job that only declares
        ``ckpt=<interval>`` asks to wait for its next checkpoint when that comes after the
        planned eviction; any other job lets maintenance go ahead. Words of the comment that
        are ignored leave a ``job_comment_ignored`` event and change nothing else."""
        j = self.jobs.get(job_id)
        if j is None:
            return JobAnswer("go", reason="not running")
        said = parse_job_comment(j.slurm.comment)
        if said.ignored:
            self._log(
                actor,
                "job_comment_ignored",
                None,
                job=job_id,
                text=j.slurm.comment,
                ignored=list(said.ignored),
            )
        if said.evict in ("go", "refuse"):
            return JobAnswer(said.evict, reason=f"job comment: evict={said.evict}")
        view = j.view(self._now)
        if said.evict == "wait":
            until = view.next_checkpoint_hours if j.ckpt_hours is not None else view.end_hours
            return JobAnswer("wait", until_hours=until, reason="job comment: evict=wait")
        if j.ckpt_hours is not None and view.next_checkpoint_hours > evict_at_hours + 1e-6:
            nxt = view.next_checkpoint_hours
            return JobAnswer("wait", until_hours=nxt, reason="until its next checkpoint")
        return JobAnswer("go")

    def _refusing_jobs(self, jobs: Mapping[int, JobView]) -> frozenset[int]:
        """The running jobs whose ``--comment`` says ``evict=refuse``."""
        return frozenset(
            j
            for j in jobs
            if j in self.jobs and parse_job_comment(self.jobs[j].slurm.comment).evict == "refuse"
        )

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

    def evict(self, job_id: int, actor: str) -> float:
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
                self.dirty_hosts.add(n)
        del self.jobs[job_id]
        return lost


__all__ = ["JobOps"]
