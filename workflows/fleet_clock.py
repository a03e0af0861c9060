"""Fleet time inside workflows, and the activity options every fleet call uses.

One clock: the fleet derives its hours from the ``wall`` each activity receives (the workflow's
``workflow.now()``), so a timer that the time-skipping server skips is skipped for the jobs,
checkpoints and repairs too.

A fleet at speed ``max`` has instead one logical clock per cluster, moved like a discrete-event
simulator moves its clock: each workflow acting on the cluster (a train, each of its domains, an
operation) is a *party*; the clock moves to the earliest instant any party waits for, only once
every party is waiting, and gives the turn to one party at a time (earliest instant, then rank,
then name). So the same seed gives the same run whatever order threads and workers take, and a
train on one cluster never moves another cluster's time. Within one workflow the party counts
its tasks: it waits (registers with the ``advance_clock`` activity) only when every task of the
workflow waits for fleet time or for something else (``aside``), and its turn wakes the tasks
whose instant came. A ``fleet_clock`` signal brings the turn; a party that hears nothing for
``RECHECK`` asks the clock itself. Nothing here runs for scaled clocks: their waits are timers.

A quiet clock (``ClockInfo.quiet``, runs past ``CLOCK_QUIET_PATCH``) arms no timer per wait:
the activity that gives a turn retries until its signal is delivered (a retry tells every
acting party again), and only the cluster's train or operation (``watch``) keeps one backing-off
timer while it waits, asking the clock to tell again in case a worker died between the two.
"""

from __future__ import annotations

import asyncio
import contextvars
from collections.abc import Awaitable, Callable, Coroutine
from datetime import timedelta
from typing import Any, TypeVar

from temporalio import workflow
from temporalio.exceptions import ActivityError, ApplicationError

with workflow.unsafe.imports_passed_through():
    from activities.fleet_activities import FleetActivities
    from orchestrator.contracts.messages import (
        CLOCK_SIGNAL,
        CLOCK_TURN_PENDING,
        AdvanceClockRequest,
        AdvanceClockResult,
        ClockInfo,
        ClockReleased,
    )
    from workflows.fleet_timing import FLEET_RETRY as FLEET_RETRY
    from workflows.fleet_timing import MAX_POLL_WALL_SECONDS as MAX_POLL_WALL_SECONDS
    from workflows.fleet_timing import POLL_WALL_CAP_PATCH as POLL_WALL_CAP_PATCH
    from workflows.fleet_timing import capped_poll_seconds, fleet_hours_now, fleet_options
    from workflows.fleet_timing import wall_seconds as wall_seconds

T = TypeVar("T")

#: A waiting party that heard nothing of its turn for this long (wall time) asks the clock
#: itself: a signal lost with a crashed worker costs this much, never the run.
RECHECK = timedelta(seconds=15)
#: A watching party's checks back off from RECHECK to this while its wait goes unanswered.
MAX_RECHECK = timedelta(minutes=10)
#: Guards quiet clocks (no timer per wait; see the module's docstring). Called once per train
#: or operation run, which hands the result to its domains in their ``ClockInfo``.
CLOCK_QUIET_PATCH = "clock-quiet-waits"
#: Where a workflow keeps its party (one per workflow run).
_PARTY_ATTR = "_trainctl_clock_party"
#: The seat (rank, key) of the code running in this task within its workflow's party: a train
#: running its domains inline (``ClockParty.inline``) sets it in each domain's task, whose own
#: tasks inherit it, so their turns at one instant come in the order separate parties' would.
SEAT: contextvars.ContextVar[tuple[int, str] | None] = contextvars.ContextVar(
    "trainctl_clock_seat", default=None
)


class ClockParty:
    """This workflow's seat at its cluster's logical clock (fleets at speed ``max`` only)."""

    def __init__(self, clock: ClockInfo, owner: str, rank: int, watch: bool = False) -> None:
        info = workflow.info()
        self.watch = watch and clock.quiet
        self.clock = clock
        self.key = info.workflow_id
        self.owner = owner
        self.parent = info.parent.workflow_id if info.parent else None
        self.rank = rank
        #: seats for the workflow's own tasks (a train running its domains inline, issue 27):
        #: its tasks' turns at one instant are taken here, seat by seat, in the order the
        #: cluster's clock gives separate parties theirs (rank, then key), with one turn of
        #: the clock for all of them; off, every waiting task wakes at the party's turn.
        self.inline = False
        self.now = 0.0  # the cluster's hour at this party's last turn
        self.busy = 1  # tasks of this workflow acting (the run itself, to begin with)
        self._waiters: dict[int, float | None] = {}  # waiting task -> the instant it wants
        self._seats: dict[int, tuple[int, str]] = {}  # waiting task -> its seat (inline)
        #: waiting task -> what ends its wait early (inline): a wait about to end so is acting
        self._interrupts: dict[int, Callable[[], bool]] = {}
        #: inline: no other party was on the clock at our last turn, so the next turns are
        #: taken by the instant's first fleet step (``fleet_call``), not ``advance_clock``
        self.alone = False
        self._pending: AdvanceClockRequest | None = None  # the turn the next step carries
        self._carried = False  # a step carries ``_pending`` now: other steps wait for it
        self._woken: set[int] = set()
        self._seq = 0
        self._epochs = 0
        self._registered: tuple[str, float | None] | None = None  # the wait the clock holds
        self._released: dict[str, float] = {}  # epoch -> hour, from fleet_clock signals
        self._children: list[str] | None = None
        self._wakes: list[str] = []
        self._driver: asyncio.Task[None] | None = None
        self._asking: AdvanceClockRequest | None = None  # the wait a quiet turn is awaited for
        workflow.set_signal_handler(CLOCK_SIGNAL, self._on_turn)

    # ------------------------------------------------------------- the tasks
    async def wait(
        self, target_hours: float | None, interrupt: Callable[[], bool] | None = None
    ) -> bool:
        """Wait until the cluster's clock reaches ``target_hours`` and it is our turn (None:
        wait for nothing, letting others move the clock); False if ``interrupt`` came first."""
        if self._driver is None:
            self._driver = asyncio.create_task(self._drive())
            if self.watch:
                asyncio.create_task(self._watch())
        self._seq += 1
        me = self._seq
        self._waiters[me] = target_hours
        if self.inline:
            self._seats[me] = SEAT.get() or (self.rank, self.key)
            if interrupt is not None:
                self._interrupts[me] = interrupt
        self.busy -= 1
        try:
            await workflow.wait_condition(
                lambda: me in self._woken or (interrupt is not None and interrupt())
            )
        finally:
            woken = me in self._woken
            self._woken.discard(me)
            self._waiters.pop(me, None)
            self._seats.pop(me, None)
            self._interrupts.pop(me, None)
            if not woken:  # interrupted or cancelled: acting again
                self.busy += 1
        return woken

    def spawn(self, coro: Coroutine[Any, Any, T]) -> asyncio.Task[T]:
        """Start a task of this workflow that acts on the cluster until it waits or ends."""
        task = asyncio.create_task(coro)
        self.busy += 1
        task.add_done_callback(self._task_done)
        return task

    def _task_done(self, _task: asyncio.Task[Any]) -> None:
        self.busy -= 1

    async def aside(self, awaitable: Awaitable[T]) -> T:
        """Await something other than fleet time (our own tasks) without holding the clock."""
        self.busy -= 1
        try:
            return await awaitable
        finally:
            self.busy += 1

    def children(self, keys: list[str]) -> None:
        """The parties (workflow ids) this one started that still run, for its next wait."""
        self._children = list(keys)

    def wake(self, key: str) -> None:
        """End ``key``'s wait at the current instant, with our next wait (a train after a
        domain's batch settled: it plans at that instant, after us). A seat of this very
        party (inline) is woken here: its tasks waiting for a later instant want this one."""
        if self.inline and key == self.key:
            for me, wanted in self._waiters.items():
                if self._seats.get(me) == (self.rank, key) and wanted is not None:
                    self._waiters[me] = min(wanted, self.now)
            return
        if key not in self._wakes:
            self._wakes.append(key)

    # ------------------------------------------------------------ the driver
    def _target(self) -> float | None:
        wanted = [t for t in self._waiters.values() if t is not None]
        return min(wanted) if wanted else None

    def _due(self) -> list[int]:
        """Inline: the waiting tasks of the first seat (rank, key) whose instant has come."""
        due = [
            me
            for me, wanted in self._waiters.items()
            if wanted is not None and wanted <= self.now and me not in self._woken
        ]
        if not due:
            return []
        first = min(self._seats[me] for me in due)
        return [me for me in due if self._seats[me] == first]

    def _must_register(self) -> bool:
        if self.busy or not self._waiters:
            return False
        if self.inline:
            # A wait its interrupt is ending (a train seeing its domain end) acts first, at
            # this instant: registering now would race its steps against the clock's move.
            if any(interrupted() for interrupted in self._interrupts.values()):
                return False
            if self._due():
                return True  # a seat's turn at this instant: taken here, not at the clock
        return (
            self._registered is None
            or self._registered[1] != self._target()
            or self._children is not None
            or bool(self._wakes)
        )

    def _on_turn(self, msg: ClockReleased) -> None:
        if msg.party == self.key:
            self._released[msg.epoch] = msg.now

    async def _drive(self) -> None:
        """Register the workflow's wait whenever all its tasks wait; wake them on its turn."""
        while True:
            await workflow.wait_condition(self._must_register)
            if self.inline and self._take_seat_turn():
                continue
            target = self._target()
            self._epochs += 1
            epoch = f"{workflow.info().run_id}/{self._epochs}"
            req = AdvanceClockRequest(
                cluster=self.clock.cluster,
                target_hours=target,
                party=self.key,
                owner=self.owner,
                parent=self.parent,
                rank=self.rank,
                epoch=epoch,
                children=self._children,
                wakes=self._wakes,
            )
            if self.inline and self.alone and target is not None and not req.wakes:
                # Alone on the clock: the instant's first step takes the turn (``fleet_call``).
                self._pending = req
                self.now = max(self.now, target)
                self._take_seat_turn()
                continue
            self._pending = None
            self._children, self._wakes = None, []
            self._registered = (epoch, target)
            self._released.clear()
            now = await self._turn(req)
            if now is None:
                continue  # our wait changed before its turn came: register the new one
            self._registered = None
            self.now = now
            if self.inline:
                self._take_seat_turn()
                continue
            for me, wanted in self._waiters.items():
                if wanted is not None and wanted <= now and me not in self._woken:
                    self._woken.add(me)
                    self.busy += 1

    def _take_seat_turn(self) -> bool:
        """Inline: wake the first seat whose instant came (False if none). The clock's
        registration is forgotten, so the party registers afresh once all wait again."""
        due = self._due()
        for me in due:
            self._woken.add(me)
            self.busy += 1
        if due:
            self._registered = None
        return bool(due)

    async def _turn(self, req: AdvanceClockRequest) -> float | None:
        """The hour of our turn for ``req``'s wait, or None once that wait is outdated."""
        until = "nothing" if req.target_hours is None else f"fleet hour {req.target_hours:.2f}"
        res: AdvanceClockResult = await workflow.execute_activity_method(
            FleetActivities.advance_clock,
            req,
            summary=f"wait on {req.cluster}'s logical clock for {until}",
            **fleet_options(),
        )
        if self.inline:
            self.alone = res.alone
        if self.clock.quiet:
            return await self._quiet_turn(req, res)
        check = req.model_copy(update={"children": None, "wakes": []})
        while not res.released:
            try:
                await workflow.wait_condition(
                    lambda: req.epoch in self._released or self._must_register(),
                    timeout=RECHECK,
                )
            except TimeoutError:  # no word of our turn: ask (it may have been lost)
                res = await workflow.execute_activity_method(
                    FleetActivities.advance_clock,
                    check,
                    summary=f"ask whether {req.cluster}'s clock reached our turn",
                    **fleet_options(),
                )
                continue
            return self._released.pop(req.epoch, None)
        return res.now

    async def _quiet_turn(self, req: AdvanceClockRequest, res: AdvanceClockResult) -> float | None:
        """``_turn`` on a quiet clock: wait for the signal (or a newer wait), with no timer."""
        if res.released:
            return res.now
        self._asking = req
        try:
            await workflow.wait_condition(
                lambda: req.epoch in self._released or self._must_register()
            )
        finally:
            self._asking = None
        return self._released.pop(req.epoch, None)

    # ------------------------------------------------ turns carried by steps
    async def carry(self) -> AdvanceClockRequest | None:
        """The turn a step about to run must carry (the instant's first), or None: once a
        step carries it, the others wait until it is taken (they must see the clock moved)."""
        if self._pending is not None and not self._carried:
            self._carried = True
            return self._pending
        if self._carried:
            await workflow.wait_condition(lambda: not self._carried)
        return None

    def carried(self, turn: AdvanceClockRequest) -> None:
        """``turn`` was taken (the clock is at its instant, this party acting)."""
        if self._pending is turn:
            self._pending, self._carried = None, False

    async def await_turn(self, turn: AdvanceClockRequest) -> None:
        """The step carrying ``turn`` found another party first: its wait stands at the
        clock; wait for its signal (the watch asks again if it is lost), acting no more alone."""
        self.alone = False
        self._asking = turn
        try:
            await workflow.wait_condition(lambda: turn.epoch in self._released)
        finally:
            self._asking = None
        self._released.pop(turn.epoch, None)

    async def _watch(self) -> None:
        """The train's or operation's one timer on a quiet clock: while a wait of this party
        goes unanswered, ask the clock now and then (backing off) to tell every acting party
        again, in case a turn's signal was lost with the worker that sent it."""
        pause = RECHECK
        while True:
            await workflow.wait_condition(lambda: self._asking is not None)
            asked = self._asking
            await workflow.sleep(pause)
            if asked is None or self._asking is not asked or asked.epoch in self._released:
                pause = RECHECK  # answered meanwhile
                continue
            pause = min(pause * 2, MAX_RECHECK)
            check = asked.model_copy(update={"children": None, "wakes": [], "recheck": True})
            res = await workflow.execute_activity_method(
                FleetActivities.advance_clock,
                check,
                summary=f"ask {asked.cluster}'s clock to tell again whose turn it is",
                **fleet_options(),
            )
            if res.released and self._asking is asked:
                self._released[asked.epoch] = res.now


async def fleet_call(
    activity: Callable[..., Any],
    req: Any,
    summary: str | None = None,
    heartbeat: bool = False,
) -> Any:
    """``workflow.execute_activity_method(activity, req)`` with ``fleet_options``; on a party
    that runs its domains inline and is alone on its clock, the instant's first step carries
    the party's turn (``req.turn``), taken by the worker before the step (``ClockTurns``):
    one activity per wake-up less. A turn not given yet (another party came) is waited for
    by its signal, then the step runs again."""
    opts = fleet_options(heartbeat)
    party: ClockParty | None = getattr(workflow.instance(), _PARTY_ATTR, None)
    carries = party is not None and party.inline and "turn" in type(req).model_fields
    turn = await party.carry() if carries and party is not None else None
    if turn is None:
        return await workflow.execute_activity_method(activity, req, summary=summary, **opts)
    assert party is not None
    try:
        return await workflow.execute_activity_method(
            activity, req.model_copy(update={"turn": turn}), summary=summary, **opts
        )
    except ActivityError as err:
        cause = err.cause
        if not (isinstance(cause, ApplicationError) and cause.type == CLOCK_TURN_PENDING):
            raise
        await party.await_turn(turn)
        return await workflow.execute_activity_method(activity, req, summary=summary, **opts)
    finally:
        party.carried(turn)


def clock_party(
    clock: ClockInfo, owner: str | None = None, rank: int = 0, watch: bool = False
) -> ClockParty:
    """This workflow's party on ``clock``'s cluster, made at the first call (logical clocks);
    ``watch``: the cluster's train or operation, which watches a quiet clock for lost turns."""
    instance = workflow.instance()
    party: ClockParty | None = getattr(instance, _PARTY_ATTR, None)
    if party is None:
        party = ClockParty(clock, owner or workflow.info().workflow_id, rank, watch)
        setattr(instance, _PARTY_ATTR, party)
    return party


def spawn(clock: ClockInfo, coro: Coroutine[Any, Any, T]) -> asyncio.Task[T]:
    """``asyncio.create_task`` that a logical clock counts as acting until it waits or ends."""
    if clock.logical:
        return clock_party(clock).spawn(coro)
    return asyncio.create_task(coro)


async def aside(clock: ClockInfo, awaitable: Awaitable[T]) -> T:
    """Await something other than fleet time without holding a logical clock."""
    if clock.logical:
        return await clock_party(clock).aside(awaitable)
    return await awaitable


def wake(clock: ClockInfo, workflow_id: str) -> None:
    """Let ``workflow_id`` (waiting on the same logical clock) act at the current instant."""
    if clock.logical:
        clock_party(clock).wake(workflow_id)


async def sleep_until(
    clock: ClockInfo, target_hours: float, from_hours: float | None = None, look: bool = False
) -> None:
    """Wait until fleet time reaches ``target_hours`` (on a logical clock: and it is our turn).

    ``look``: a drain's wait for its jobs, which the caller follows with a look, so on a fleet
    that changes outside trainctl (Slurm) it lasts at most ``MAX_POLL_WALL_SECONDS``: a job
    there may end long before the hour its wait was computed from (its time limit, its
    checkpoint), and nobody says so, so the cordoned node would sit idle until then."""
    if clock.logical:
        await clock_party(clock).wait(target_hours)
        return
    # Measure from the fleet's own reading when we have one: it is what the target was computed
    # against, and a wait computed from it can never collapse to zero while time stands still.
    now = fleet_hours_now(clock) if from_hours is None else from_hours
    delay = (target_hours - now) * 3600.0 / clock.speed
    if delay > 0:
        if look:
            delay = capped_poll_seconds(clock, delay)
        await workflow.sleep(timedelta(seconds=max(delay, 0.001)))
