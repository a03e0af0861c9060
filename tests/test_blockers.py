"""Who holds a full budget, as a waiting train or operation names it: the hosts out of service
grouped by holder (at most ten, the rest counted), each with its reason, and the next command."""

from __future__ import annotations

from orchestrator.contracts.constants import NO_OWNER, QUARANTINE_OWNER, REPAIR_OWNER
from orchestrator.contracts.views import HostView
from orchestrator.planning.blockers import REASON_CHARS, SHOWN, budget_holders


def _host(name: str, state: str, owner: str, reason: str = "") -> HostView:
    return HostView(name, "r0", "z0", state, owner, reason=reason)


def test_holders_are_grouped_each_host_with_its_reason_and_the_command() -> None:
    hosts = [
        _host("h01", "in_service", NO_OWNER),
        _host("h02", "quarantined", QUARANTINE_OWNER, "verification failed: cuda 13.1"),
        _host("h03", "in_repair", REPAIR_OWNER, "faulty_gpu"),
        _host("h04", "quarantined", NO_OWNER, "slurm drain: RMA ticket 4411"),
        _host("h05", "draining", "ops-cuda-13-1"),
    ]
    text = budget_holders(hosts)
    assert "h01" not in text  # serving: holds nothing
    assert "quarantined: h02 (verification failed: cuda 13.1)" in text
    assert "in repair: h03 (faulty_gpu)" in text
    site = "not held by trainctl (the site or a failure): h04 (slurm drain: RMA ticket 4411)"
    assert site in text
    assert "held by ops-cuda-13-1: h05" in text
    assert text.endswith("See why: trainctl fleet host h02")


def test_at_most_ten_are_named_and_the_rest_counted() -> None:
    hosts = [_host(f"h{i:02d}", "in_repair", REPAIR_OWNER, "x" * 90) for i in range(14)]
    text = budget_holders(hosts)
    named = [h.name for h in hosts if h.name in text]
    assert len(named) == SHOWN and "and 4 more" in text
    assert "x" * REASON_CHARS not in text and "..." in text  # long reasons are cut


def test_nothing_out_names_nobody() -> None:
    assert budget_holders([_host("h01", "in_service", NO_OWNER)]) == ""


def test_a_train_at_a_full_budget_names_who_holds_it() -> None:
    """The planner's wait names the holders; the on-call words keep its plain sentence."""
    from orchestrator.contracts.ui_text import explain_wait
    from orchestrator.planning import train_plan

    held = [
        _host("h00", "quarantined", QUARANTINE_OWNER, "verification failed"),
        _host("h01", "in_maintenance", "train-c00"),
    ]
    due = [HostView(f"h{i:02d}", "r0", "z0", "in_service", NO_OWNER, None, True) for i in (2, 3)]
    plan = train_plan.choose_domain([*held, *due], {}, 1.0, train_plan.BudgetView(limit=2), 4, 4.0)
    assert plan.hosts == []
    assert plan.waiting.startswith("budget exhausted: "), plan.waiting
    assert "quarantined: h00 (verification failed)" in plan.waiting
    assert "held by train-c00: h01" in plan.waiting
    words = explain_wait(plan.waiting)
    assert words.startswith("the capacity budget is used up") and "held: quarantined: h00" in words
