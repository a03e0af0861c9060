"""Approval gates: a person (or another system) signs off before a campaign stage, after it, or
before an operation starts.

A spec asks for one with ``approval``::

    approval: {before: true, after: false, approvers: [alice, change-board], timeout: 7d}

While a gate waits, the workflow's status lists it (an ``ApprovalGate``: what waits, since
when, who may approve, the exact command); ``approve`` (an update of the campaign or
operation workflow, what ``trainctl campaign approve`` / ``trainctl ops approve`` send) opens
it for a listed approver and refuses anyone else naming the field ``approver``. The approver's
name and the Temporal client identity that sent the update are kept with the gate: a record
of who said yes, not an authentication (unless the connection itself carries an API key or an
mTLS identity). A gate nobody approves within ``timeout`` of wall time (people approve on
wall clocks, whatever speed the fleet runs at) fails what it guards, saying so.

The gates live in the workflow's status, which continue-as-new carries, so a gate approved
stays approved in the next run; a ``--cron`` campaign or operation asks again every run.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from orchestrator.contracts.models import DurationHours, parse_duration_hours

GateName = Literal["before", "after"]
#: A gate's timeout when the spec gives none: a week, a change board's usual turn.
DEFAULT_TIMEOUT_HOURS = 168.0


class ApprovalSpec(BaseModel):
    """Who must sign off, where, and how long the gate waits (wall time)."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    #: Wait for approval before the stage (the operation) starts.
    before: bool = True
    #: Wait for approval after the stage has passed, before the next one starts.
    after: bool = False
    #: Names that may approve (a person's login, or a system's name).
    approvers: list[str] = Field(min_length=1, max_length=100)
    #: How long a gate waits (wall time) before it fails the stage or the operation.
    timeout_hours: DurationHours = Field(default=DEFAULT_TIMEOUT_HOURS, alias="timeout")

    @field_validator("approvers")
    @classmethod
    def _names(cls, v: list[str]) -> list[str]:
        for name in v:
            if not name.strip() or len(name) > 128:
                raise ValueError(f"{name[:40]!r} is not an approver name")
        return v

    @field_validator("timeout_hours", mode="before")
    @classmethod
    def _timeout(cls, v: object) -> float:
        hours = parse_duration_hours(v, "timeout")
        if hours <= 0:
            raise ValueError("timeout: must be above zero")
        return hours


class ApprovalGate(BaseModel):
    """One gate of a run, waiting or decided (kept in the status for the record)."""

    stage: str = ""  # the campaign stage it guards ("" for an operation)
    gate: GateName = "before"
    state: Literal["waiting", "approved", "timed_out"] = "waiting"
    approvers: list[str] = Field(default_factory=list)
    since: datetime
    deadline: datetime
    command: str = ""  # the exact command that approves it
    approver: str = ""
    identity: str = ""  # the Temporal client identity that sent the approval
    reason: str = ""
    decided_at: datetime | None = None


class ApproveRequest(BaseModel):
    """The ``approve`` update's input."""

    stage: str = ""
    gate: GateName = "before"
    approver: str = Field(min_length=1, max_length=128)
    identity: str = ""
    reason: str = Field(default="", max_length=2000)


def open_gate(
    spec: ApprovalSpec, stage: str, gate: GateName, now: datetime, command: str
) -> ApprovalGate:
    """A gate that starts waiting ``now``."""
    return ApprovalGate(
        stage=stage,
        gate=gate,
        approvers=list(spec.approvers),
        since=now,
        deadline=now + timedelta(hours=spec.timeout_hours),
        command=command,
    )


def find_gate(gates: list[ApprovalGate], stage: str, gate: GateName) -> ApprovalGate | None:
    """The last gate recorded for ``stage`` and ``gate``."""
    found = [g for g in gates if g.stage == stage and g.gate == gate]
    return found[-1] if found else None


def refusal(gates: list[ApprovalGate], req: ApproveRequest) -> str:
    """Why ``req`` cannot approve (a message naming the field), or '' when it may."""
    gate = find_gate(gates, req.stage, req.gate)
    where = f"stage {req.stage!r} gate {req.gate!r}" if req.stage else f"gate {req.gate!r}"
    if gate is None or gate.state != "waiting":
        waiting = [g for g in gates if g.state == "waiting"]
        now = ", ".join(f"{g.stage or 'start'}/{g.gate}" for g in waiting) or "none"
        field = "stage" if req.stage else "gate"
        return f"{field}: no approval waits at {where} (waiting now: {now})"
    if req.approver not in gate.approvers:
        return (
            f"approver: {req.approver!r} may not approve {where}; "
            f"approvers: {', '.join(gate.approvers)}"
        )
    return ""


def approve(gate: ApprovalGate, req: ApproveRequest, now: datetime) -> None:
    """Record ``req``'s approval on ``gate``."""
    gate.state, gate.approver, gate.identity = "approved", req.approver, req.identity
    gate.reason, gate.decided_at = req.reason, now


def time_out(gate: ApprovalGate, now: datetime) -> str:
    """Record that nobody approved ``gate`` in time; the reason the guarded work fails."""
    gate.state, gate.decided_at = "timed_out", now
    where = f"stage {gate.stage} " if gate.stage else ""
    hours = (gate.deadline - gate.since).total_seconds() / 3600.0
    return (
        f"approval {where}{gate.gate} timed out: nobody of {', '.join(gate.approvers)} "
        f"approved within {hours:g} h"
    )


def waiting_text(gate: ApprovalGate) -> str:
    """One line for status and the UI: what waits, since when, who may approve, the command."""
    where = f"stage {gate.stage} ({gate.gate})" if gate.stage else f"the start ({gate.gate})"
    return (
        f"waiting for approval of {where} since {gate.since:%Y-%m-%d %H:%M:%S} UTC "
        f"(until {gate.deadline:%Y-%m-%d %H:%M:%S} UTC) by {' or '.join(gate.approvers)}: "
        f"{gate.command}"
    )


def approval_request(
    approver: str, identity: str, stage: str = "", gate: GateName = "before", reason: str = ""
) -> ApproveRequest:
    """An ``approve`` update's input; a bad approver name is refused naming ``approver``."""
    name = approver.strip()
    if not name or len(name) > 128:
        raise ValueError(f"approver: {approver[:40]!r} is not an approver name")
    return ApproveRequest(
        stage=stage, gate=gate, approver=name, identity=identity, reason=reason[:2000]
    )


def refused_field(message: str) -> str:
    """The field a refusal names (its text up to the first colon: ``approver``, ``stage``)."""
    head = message.split(":", 1)[0]
    return head if head in ("approver", "stage", "gate") else "id"
