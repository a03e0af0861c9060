"""A running Slurm job as trainctl reads it: in fleet hours, with the checkpoints it declares.

Slurm reports a job's start and end in Unix seconds and knows nothing of checkpoints; trainctl
plans evictions in fleet hours around them. ``RunningJob`` is one job of the last ``squeue``
read that runs on trainctl's hosts, and ``declared_checkpoint_hours`` reads the interval a job
states in its ``--comment`` (``ckpt=10m``). Kept apart from the session so the core that holds
the jobs, the reconciling that reads them and the job control that evicts them share one type.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime

from orchestrator.contracts.job_comment import parse_job_comment, quiet_hours
from orchestrator.contracts.views import JobView
from orchestrator.fleet.slurm.commands import SlurmJob


@dataclass
class RunningJob:
    """A running Slurm job, in fleet hours; ``state`` as the status summary counts it."""

    slurm: SlurmJob
    start_hours: float
    end_hours: float
    ckpt_hours: float | None
    state: str = "running"
    #: the end of its quiet hours (``quiet_until=``), capped by the config's ``max_quiet``
    quiet_until_hours: float | None = None

    def view(self, now: float) -> JobView:
        from orchestrator.contracts.views import last_checkpoint, next_checkpoint

        # Slurm reports a start to the second, so a job that has just started can read as
        # starting a moment after ``now``: it runs, so it started by now (else its start would
        # pass for a checkpoint still to come, and a drain would stop it "right after" it).
        start = min(self.start_hours, now)
        interval = self.ckpt_hours or max(self.end_hours - start, 1e-9)
        return JobView(
            self.slurm.id,
            len(self.slurm.nodes),
            self.slurm.nodes,
            self.end_hours,
            next_checkpoint(start, interval, now, self.end_hours),
            last_checkpoint(start, interval, now, self.end_hours),
            self.quiet_until_hours,
        )


def declared_checkpoint_hours(comment: str) -> float | None:
    """The checkpoint interval a job declares in its ``--comment`` (``ckpt=10m``), if any."""
    return parse_job_comment(comment).ckpt_hours


def declared_quiet_hours(
    comment: str, anchor_unix: float, start_hours: float, max_quiet_hours: float
) -> float | None:
    """The fleet hour a job's quiet hours end (``quiet_until=`` in its ``--comment``), at most
    ``max_quiet_hours`` after its start; fleet hour 0 is ``anchor_unix``."""
    anchor = datetime.fromtimestamp(anchor_unix, UTC)
    return quiet_hours(parse_job_comment(comment).quiet_until, anchor, start_hours, max_quiet_hours)


__all__ = ["RunningJob", "declared_checkpoint_hours", "declared_quiet_hours"]
