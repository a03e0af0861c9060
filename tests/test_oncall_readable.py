"""On-call text reads as people read it: durations as durations, instants as instants, plurals
right, and a cluster glob on a page shown as written rather than as a link."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

from click.testing import CliRunner

from orchestrator.app.cli import main
from orchestrator.app.cli.campaign import _print_status
from orchestrator.app.cli.train import print_status
from orchestrator.arbiter.ui import arbiter_details
from orchestrator.campaign.progress import finish_status, new_status
from orchestrator.campaign.rollback import note_rollback_operation
from orchestrator.campaign.ui import campaign_details, campaign_summary
from orchestrator.contracts.arbiter_types import ArbiterState, HolderEntry
from orchestrator.contracts.campaign_spec import CampaignSpec, Gates
from orchestrator.contracts.campaign_types import CampaignState, ClusterStage, StagePlanModel
from orchestrator.contracts.models import CapacityBudget
from orchestrator.contracts.ops_types import OperationStatus
from orchestrator.contracts.train_types import TrainState, TrainStatus
from orchestrator.contracts.ui_text import at_hour, duration, explain_wait, item_list
from orchestrator.ops.ui import operation_details, operation_summary
from orchestrator.planning.failure_gate import judge
from orchestrator.planning.ops_plan import _split_warning
from orchestrator.train.ui import failure_lines
from tests.train_helpers import make_fleet


def test_durations_read_as_minutes_hours_and_days() -> None:
    """A span of fleet time prints as seconds, minutes, hours and minutes, or days."""
    assert [duration(h) for h in (0.01, 1 / 30, 1.5, 2.0, 168.0, 150.4)] == [
        "36 s",
        "2 min",
        "1 h 30 min",
        "2 h",
        "7 d",
        "6 d 6 h",
    ]
    assert at_hour(12.5, 10.2) == "fleet hour 12.5 (in 2 h 18 min)"


def test_train_status_sets_a_length_beside_the_target(capsys) -> None:
    """The projected end is an instant; the target is compared with the cycle's length."""
    st = TrainStatus(
        cluster="c00",
        state="running",
        cycles_completed=0,
        hosts_total=128,
        hosts_visited_this_cycle=40,
        in_maintenance=8,
        quarantined=0,
        domain_size=8,
        budget=CapacityBudget(max_unavailable="10%"),
        targets={"os": "6.8.0-50"},
        cycle_target_hours=168.0,
        cycle_projected_end_hours=200.4,
        cycle_started_hours=50.0,
        cycle_on_track=True,
    )
    print_status(st.model_dump(mode="json"))
    out = capsys.readouterr().out
    assert (
        "projected to end at fleet hour 200.4, 6 d 6 h after it began (target 7 d: on track)" in out
    )
    assert "168 h" not in out


def test_campaign_plan_prints_a_short_bake_in_minutes(tmp_home: Path) -> None:
    """``campaign plan`` with a two-minute bake says ``bake 2 min``, not ``0.0333333h``."""
    make_fleet(tmp_home, 3600.0)
    spec = tmp_home / "c.yaml"
    spec.write_text(
        "name: k\ntargets: {os: 6.8.0-50}\n"
        "stages:\n  - {name: canary, clusters: [c00], hosts: 4, bake: 2m}\n"
    )
    res = CliRunner().invoke(main, ["campaign", "plan", "--spec", str(spec)])
    assert res.exit_code == 0, res.output
    assert "bake 2 min" in res.output and "0.0333" not in res.output
    assert "(4 hosts, 1 cluster at a time)" in res.output and "(s)" not in res.output


def test_one_of_a_thing_is_singular() -> None:
    """One split job is split, one host is a host."""
    one = _split_warning("c00", 1, 1)
    assert one.startswith("c00: 1 running job exceeds a wave of 1 host and is split: it is")
    assert "are split" not in one and "1 hosts" not in one
    assert "2 running jobs exceed a wave of 4 hosts and are split: each" in _split_warning(
        "c00", 2, 4
    )


def test_a_cluster_glob_is_not_a_link_on_the_page() -> None:
    """``c0[123]`` reaches the UI's markdown with its brackets escaped, code spans as written."""
    spec = CampaignSpec.model_validate(
        {
            "name": "k",
            "targets": {"os": "6.8.0-50"},
            "scope": {"cluster": "c0[123]"},
            "stages": [{"name": "all", "clusters": ["c01"]}],
        }
    )
    assert "over c0\\[123\\] (all)" in campaign_summary(spec)
    assert "over c0\\[123\\]" in operation_summary("reboot", {}, "c0[123]")
    lines = item_list(["holder", "note"], [("c0[1]", "see `trainctl fleet host h[1]`")])
    assert lines == ["- **c0\\[1\\]** · note: see `trainctl fleet host h[1]`"]


def test_a_rolled_back_campaign_says_what_it_took_back_and_what_next() -> None:
    """A rolled-back campaign's page names the clusters, hosts and versions rolled back and the
    next commands; no stage or cluster is left rolling, with bake time or ``marked_bad: {}``."""
    spec = CampaignSpec.model_validate(
        {
            "name": "k",
            "targets": {"os": "6.12.0-bad"},
            "stages": [{"name": "canary", "clusters": ["c00"], "hosts": 4, "bake": "2h"}],
        }
    )
    plan = [
        StagePlanModel(
            name="canary",
            clusters=["c00"],
            hosts_per_cluster={"c00": 4},
            partial=True,
            bake_hours=2.0,
            parallel=1,
            gates=Gates(),
        )
    ]
    st = CampaignState(status=new_status(spec, plan), plan=plan, blamed={"os": "6.12.0-bad"})
    stage = st.status.stages[0]
    stage.state, stage.bake_remaining_hours = "baking", 2.0
    stage.clusters["c00"] = ClusterStage(cluster="c00", state="rolling")
    st.status.hosts_rolled_back = 3
    st.status.reason = "stage canary failed; blame names os=6.12.0-bad; rolled back 3 hosts"
    finish_status(st, "rolled_back")
    page = campaign_details(spec, st)
    assert "**Rolled back:** 3 hosts of c00 to their previous versions" in page
    assert "os 6.12.0-bad marked bad fleet-wide" in page
    assert "`trainctl versions list`" in page
    assert "`trainctl versions clear os=6.12.0-bad --reason ...`" in page
    assert "rolling" not in page.replace("Rolled back", "") and "bake left" not in page
    c00 = st.status.stages[0].clusters["c00"]
    assert (c00.state, c00.marked_bad) == ("rolled_back", {"os": "6.12.0-bad"})
    assert st.status.stages[0].bake_remaining_hours is None


def test_counts_of_one_read_in_the_singular(tmp_home: Path) -> None:
    """``fleet init`` of one cluster and an arbiter with one holder say so without ``(s)``."""
    res = CliRunner().invoke(main, ["fleet", "init", "--preset", "small"])
    assert res.exit_code == 0, res.output
    assert "fleet small: 1 cluster, 128 hosts" in res.output and "(s)" not in res.output
    since = datetime(2026, 1, 1, tzinfo=UTC)
    one = HolderEntry(
        holder="train-c00",
        workflow_id="train-c00",
        kind="train",
        exclusive=False,
        want=1,
        holding=1,
        granted=1,
        limit=1,
        since=since,
    )
    page = arbiter_details(ArbiterState(cluster="c00", holders={"train-c00": one}))
    assert "**Shared** · 1 holder holds c00's budget" in page
    assert "**Maintenance budget:** 1 host held" in page and "(s)" not in page


def test_a_rollback_counts_its_hosts_per_cluster_on_the_page_and_in_status(capsys) -> None:
    """A campaign rolled back on two clusters counts the hosts put back on each, on its page and
    in ``campaign status``, which also says the next commands and shows no live stage data."""
    spec = CampaignSpec.model_validate(
        {
            "name": "k",
            "targets": {"os": "6.12.0-bad"},
            "stages": [{"name": "all", "clusters": ["c00", "c01"], "bake": "2h"}],
        }
    )
    plan = [
        StagePlanModel(
            name="all",
            clusters=["c00", "c01"],
            hosts_per_cluster={"c00": 64, "c01": 64},
            partial=False,
            bake_hours=2.0,
            parallel=2,
            gates=Gates(),
        )
    ]
    st = CampaignState(status=new_status(spec, plan), plan=plan, blamed={"os": "6.12.0-bad"})
    stage = st.status.stages[0]
    stage.state, stage.bake_remaining_hours = "baking", 2.0
    for cluster, back in (("c00", 3), ("c01", 1)):
        stage.clusters[cluster] = ClusterStage(cluster=cluster, state="rolling")
        done = OperationStatus(
            operation_id=f"op-{cluster}",
            kind="rollback",
            targets={},
            consistency="host",
            state="succeeded",
            hosts_changed=back,
        )
        assert note_rollback_operation(st.status, cluster, done) == ""
    finish_status(st, "rolled_back")
    assert "**Rolled back:** 4 hosts (c00 3, c01 1) to their previous versions" in (
        campaign_details(spec, st)
    )
    _print_status(st.status.model_dump(mode="json"))
    out = capsys.readouterr().out
    assert "rolled back: 4 hosts (c00 3, c01 1) to their previous versions; os 6.12.0-bad" in out
    assert "next: trainctl versions list shows what is marked bad" in out
    assert "trainctl versions clear os=6.12.0-bad --reason ..." in out
    assert "rolling" not in out and "bake" not in out


def test_reasons_on_pages_keep_their_brackets_and_angle_brackets() -> None:
    """A reason naming a hostlist or carrying an error in angle brackets reaches the operation
    and train pages as written, not as a link or a dropped HTML tag."""
    why = "site drained c00-h[01-03]: <urlopen error [Errno 111] Connection refused>"
    escaped = "c00-h\\[01-03\\]: \\<urlopen error \\[Errno 111\\] Connection refused\\>"
    op = OperationStatus(
        operation_id="op",
        kind="reboot",
        targets={},
        consistency="host",
        state="failed",
        reason=why,
    )
    assert escaped in operation_details(op)
    failures = failure_lines(TrainState(recent_failures=[("c00-h01", why)]))
    assert failures == [f"- **Latest failures:** `c00-h01`: site drained {escaped}"]


def test_a_bad_builds_verdict_and_a_pending_stage_read_right(capsys) -> None:
    """The gate's verdict says ``the 1 bad host alone explains``; a stage not yet begun has no
    limit yet in ``campaign status`` (never ``at most -``)."""
    verdict = judge(4, 4, 0.004)
    assert "more than the 1 bad host alone explains (base rate" in verdict.reason
    spec = CampaignSpec.model_validate(
        {"name": "k", "targets": {"os": "6.8.0-50"}, "stages": [{"name": "a", "clusters": ["c00"]}]}
    )
    plan = [
        StagePlanModel(
            name="a",
            clusters=["c00"],
            hosts_per_cluster={"c00": 64},
            partial=False,
            bake_hours=0.0,
            parallel=1,
            gates=Gates(),
        )
    ]
    _print_status(new_status(spec, plan).model_dump(mode="json"))
    out = capsys.readouterr().out
    assert "a: pending, 0/64 changed, 0 failed (no limit yet)" in out and "at most -" not in out


def test_breaker_status_gives_its_window_as_a_duration(capsys) -> None:
    """``breaker status`` says ``1 failure within 1 d of fleet time``, not ``24 fleet hours``."""
    from orchestrator.app.cli.breaker import _print as print_breaker

    print_breaker(
        {
            "cluster": "c00",
            "state": "closed",
            "failures_in_window": 1,
            "window_hours": 24.0,
            "max_failures": 3,
        }
    )
    out = capsys.readouterr().out
    assert "c00: breaker closed; 1 failure within 1 d of fleet time (at most 3 tolerated)" in out


def test_an_operations_wait_for_room_reads_in_durations() -> None:
    """An operation waiting for room says ``at most 11 h 54 min more (max_wait_for_room
    12 h)``, not ``11.9 h``, on its pages and in ``ops status``."""
    why = (
        "c00: 2 hosts out of service; waits for room, at most 11.9 h more (max_wait_for_room 12 h)"
    )
    assert explain_wait(why) == (
        "c00: 2 hosts out of service; waits for room, at most 11 h 54 min more "
        "(max_wait_for_room 12 h)"
    )


def test_an_operations_wait_for_room_is_worded_in_durations_at_the_source() -> None:
    """The workflow's own wait-for-room text (its progress, ``ops status --json``'s reason,
    the failure) gives durations, never ``0.0333333 h``; runs recorded before the
    ``ops-room-wait-text`` patch keep their words, as their progress signals depend on them."""
    from orchestrator.ops.ui import no_room_text, room_wait_text

    why = "budget.max_unavailable: 3 hosts out of service in c00"
    assert room_wait_text(why, 1 / 30, 1 / 30) == (
        f"{why}; waits for room, at most 2 min more (max_wait_for_room 2 min)"
    )
    assert room_wait_text(why, 1.5, 200.0) == (
        f"{why}; waits for room, at most 1 h 30 min more (max_wait_for_room 8 d 8 h)"
    )
    assert no_room_text(why, 1 / 30) == f"{why}: no room within max_wait_for_room (2 min)"
    assert room_wait_text(why, 1 / 30, 1 / 30, readable=False) == (
        f"{why}; waits for room, at most 0.0 h more (max_wait_for_room 0.0333333 h)"
    )
    assert no_room_text(why, 12.0, readable=False) == (
        f"{why}: no room within max_wait_for_room (12 h)"
    )


def test_a_continued_campaigns_page_still_says_what_the_campaign_is() -> None:
    """A run continued as new has no summary (the server starts it without the first run's,
    and no API sets one later): the current details carry the summary's words, escaped."""
    spec = CampaignSpec.model_validate(
        {
            "name": "k",
            "targets": {"os": "6.8.0-50"},
            "scope": {"cluster": "c0[123]"},
            "stages": [{"name": "canary", "clusters": ["c01"]}, {"name": "rest", "clusters": "*"}],
        }
    )
    page = campaign_details(spec, CampaignState(status=new_status(spec, []), plan=[]))
    assert "- **Campaign:** k over c0\\[123\\] · stages: canary → rest" in page, page
