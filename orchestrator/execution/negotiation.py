"""Job negotiation (TaskControl-style): what an answer to "may we evict you?" leads to.

Before a train, an operation or a campaign evicts a job it asks the job's owner (through the
backend's ``ask_job``), telling it when the drain policy would stop it. The owner answers:

- ``go``: go ahead; the job is evicted at the instant it was asked about: at once, or right
  after its next checkpoint when the policy (job-aware) timed the eviction so, since waiting
  for a checkpoint costs nobody work (``drain._question``);
- ``wait`` until an instant: its next checkpoint or its end; the job is evicted then, without
  being asked again; an instant past the drain deadline is not granted: the job is kept until
  the deadline (``held``);
- ``refuse``: not now; it is asked again when it says (its next checkpoint, or after
  ``REASK_HOURS``), never past the deadline: a refusal whose next question would come at or
  after it keeps the job until the deadline (``held``); a visit honours at most
  ``max_refusals`` of them, after which the deadline rules: the job is evicted at the drain
  deadline, or, for the job-aware policy, right after its last checkpoint before the deadline
  (``JobWait.final_hours``: the policy loses no work it need not lose because a job said "not
  now").

``held``: an answer the visit honours but cannot grant in full keeps the job to the drain
deadline, or, job-aware, to right after its last checkpoint before the deadline when one is
still ahead (it would be stopped before its wish either way; that instant loses no work). It
is never "at once": a job that has no checkpoint left before the deadline (a Slurm job that
declares none, or one whose interval is longer than ``max_wait``) still gets its ``max_wait``.

Past the deadline no answer delays anything. ``resolve`` is the one rule: the drain tracker
(inside workflows and the simulator) folds answers with it, and the ask step (``drain.ask_jobs``)
records the same outcome in the fleet's event record, so what the record says is what happens.
Pure and deterministic.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

ANSWERS = ("go", "wait", "refuse")
#: A job that refuses without saying when to ask again is asked again this much later.
REASK_HOURS = 0.5
#: Refusals a visit honours by default (a spec's ``drain.max_refusals``).
DEFAULT_MAX_REFUSALS = 2
_EPS = 1e-6


@dataclass(frozen=True)
class Talk:
    """One job's negotiation during one visit (one drain): questions, refusals, the outcome."""

    asks: int = 0
    refusals: int = 0
    answer: str = ""
    reason: str = ""
    #: the question's planned eviction instant (fleet hours)
    asked_for: float = 0.0
    #: evict at this instant without asking again (go, wait, or refusals spent)
    evict_at: float | None = None
    #: ask again at this instant (a refusal the visit still honours)
    ask_at: float | None = None

    def describe(self) -> str:
        """One line for the UI, status and logs: the question, the answer, the wait."""
        said = f"{self.answer}" + (f" ({self.reason})" if self.reason else "")
        if self.evict_at is not None:
            then = f"evict at fleet hour {self.evict_at:.2f}"
        elif self.ask_at is not None:
            then = f"ask again at fleet hour {self.ask_at:.2f}"
        else:
            then = "pending"
        return (
            f"asked {self.asks}x to stop at {self.asked_for:.2f}: {said}; "
            f"refused {self.refusals}x; {then}"
        )


def resolve(
    talk: Talk,
    answer: str,
    until_hours: float | None,
    reason: str,
    now: float,
    deadline: float,
    max_refusals: int,
    asked_for: float,
    final: float | None = None,
) -> Talk:
    """The negotiation after one more answer at fleet hour ``now`` (see the module docstring).

    ``final`` is when the drain policy stops the job once the deadline rules (job-aware: right
    after its last checkpoint before the deadline); the deadline itself if not given."""
    talk = replace(talk, asks=talk.asks + 1, answer=answer, reason=reason, asked_for=asked_for)
    bound = max(deadline if final is None else min(final, deadline), now)
    held = bound if bound > now + _EPS else max(deadline, now)
    if now + _EPS >= deadline and answer != "go":
        return replace(talk, evict_at=now, ask_at=None, reason=reason or "drain deadline reached")
    if answer == "go":
        return replace(talk, evict_at=min(max(asked_for, now), bound), ask_at=None)
    if answer == "wait":
        late = until_hours is not None and until_hours > deadline
        at = now if until_hours is None else held if late else max(until_hours, now)
        return replace(talk, evict_at=at, ask_at=None)
    refusals = talk.refusals + 1
    if refusals >= max_refusals:
        return replace(talk, refusals=refusals, evict_at=bound, ask_at=None)
    again = now + REASK_HOURS if until_hours is None or until_hours <= now else until_hours
    if again + _EPS >= deadline:
        return replace(talk, refusals=refusals, evict_at=held, ask_at=None)
    return replace(talk, refusals=refusals, ask_at=again, evict_at=None)
