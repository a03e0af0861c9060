"""The approval gates a campaign or an operation waits at (``orchestrator.contracts.approvals``).

One small helper both workflows hold: it opens a gate in the status's list of gates, waits
(a timer to the gate's deadline, cut short by the ``approve`` update or by a stop), and
records the outcome there. Its list is the workflow's status's own, so continue-as-new carries
every decided gate into the next run, where an approved gate is not asked again.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from datetime import timedelta

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from orchestrator.contracts.approvals import (
        ApprovalGate,
        ApprovalSpec,
        ApproveRequest,
        GateName,
        approve,
        find_gate,
        open_gate,
        refusal,
        time_out,
    )

#: Patch id of the gates in the campaign and operation workflows (``workflows.patches``).
APPROVAL_GATES = "approval-gates"


class ApprovalGates:
    """The gates of one workflow run, kept in ``gates`` (its status's list)."""

    def __init__(self, gates: list[ApprovalGate]) -> None:
        self.gates = gates

    def validate(self, req: ApproveRequest) -> None:
        """The ``approve`` validator: refuse (naming the field) what may not approve."""
        why = refusal(self.gates, req)
        if why:
            raise ValueError(why)

    def approve(self, req: ApproveRequest) -> ApprovalGate:
        gate = find_gate(self.gates, req.stage, req.gate)
        assert gate is not None  # the validator found it waiting
        approve(gate, req, workflow.now())
        return gate

    def approved(self, stage: str, gate: GateName) -> bool:
        found = find_gate(self.gates, stage, gate)
        return found is not None and found.state == "approved"

    def open(self, spec: ApprovalSpec, stage: str, gate: GateName, command: str) -> ApprovalGate:
        """The gate for ``stage``/``gate``: the one recorded (a continued run), else a new one."""
        found = find_gate(self.gates, stage, gate)
        if found is not None and found.state != "timed_out":
            return found
        opened = open_gate(spec, stage, gate, workflow.now(), command)
        self.gates.append(opened)
        return opened

    async def wait(self, gate: ApprovalGate, stop: Callable[[], bool]) -> str:
        """Wait at ``gate`` until approved ('') or stopped ('stopped'); past its deadline, the
        reason the guarded work fails."""
        left = (gate.deadline - workflow.now()).total_seconds()
        if gate.state == "waiting" and left > 0:
            with contextlib.suppress(TimeoutError):
                await workflow.wait_condition(
                    lambda: gate.state != "waiting" or stop(), timeout=timedelta(seconds=left)
                )
        if gate.state == "approved":
            return ""
        if stop():
            return "stopped"
        return time_out(gate, workflow.now())
