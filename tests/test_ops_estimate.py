"""An operation's estimate replays its waves by the drain's rules and gives ranges that hold."""

from __future__ import annotations

from orchestrator.contracts.models import HostState
from orchestrator.contracts.views import ClusterSnapshot, HostView, JobView
from orchestrator.planning.ops_estimate import DrainModel, count_range, estimate_waves

HOSTS = [f"c00-z00-r000-h{i:02d}" for i in range(8)]
MAINT = dict.fromkeys(HOSTS, 0.5)


def snapshot(jobs: dict[int, tuple[list[int], float]], refusing: frozenset[int]) -> ClusterSnapshot:
    """Eight hosts; ``jobs``: id -> (its hosts by index, its end); checkpoints every hour."""
    on = {HOSTS[i]: jid for jid, (idx, _) in jobs.items() for i in idx}
    hosts = tuple(
        HostView(h, "c00-z00-r000", "c00-z00", HostState.IN_SERVICE, job_id=on.get(h))
        for h in HOSTS
    )
    views = {
        jid: JobView(jid, len(idx), tuple(HOSTS[i] for i in idx), end, 0.5, -0.5)
        for jid, (idx, end) in jobs.items()
    }
    return ClusterSnapshot("c00", 0.0, len(HOSTS), hosts, views, refusing=refusing)


def waves(snap: ClusterSnapshot) -> list[list[HostView]]:
    return [list(snap.hosts[:4]), list(snap.hosts[4:])]


def test_a_refusing_job_is_stopped_by_one_more_wave_at_the_end():
    """A job that refuses goes back to the end: its hosts get a wave of their own there (the
    last one has no room), where it is stopped once; the emptied wave still counts."""
    snap = snapshot({1: ([0, 1, 2, 3], 50.0), 2: ([4, 5, 6, 7], 60.0)}, frozenset({1}))
    est = estimate_waves(snap, waves(snap), MAINT, 2.0, DrainModel(2.0, release=True), cap=4)
    assert [len(w.hosts) for w in est.waves] == [0, 4, 4]
    assert [w.jobs_interrupted for w in est.waves] == [[], [2], [1]]
    assert est.interrupted == 2


def test_without_release_a_refusing_job_is_stopped_by_its_own_wave():
    """A cut-over that waits for refusers (no release) keeps the waves as cut."""
    snap = snapshot({1: ([0, 1, 2, 3], 50.0), 2: ([4, 5, 6, 7], 60.0)}, frozenset({1}))
    est = estimate_waves(snap, waves(snap), MAINT, 2.0, DrainModel(2.0), cap=4)
    assert [w.jobs_interrupted for w in est.waves] == [[1], [2]]


def test_hosts_idle_until_a_later_wave_widen_the_range_above_todays_jobs():
    """Hosts idle today in the second wave will most likely run new jobs when it comes."""
    snap = snapshot({1: ([0, 1, 2, 3], 50.0), 2: ([4], 60.0)}, frozenset())
    est = estimate_waves(snap, waves(snap), MAINT, 2.0)
    assert est.interrupted == 2 and est.expected_new > 0
    low, high = count_range(est.interrupted, est.expected_new)
    assert low <= est.interrupted + est.expected_new <= high


def test_every_range_is_at_most_twice_its_low_end_plus_two():
    """The range rule holds for every count and expectation."""
    for today in range(0, 60):
        for tenths in range(0, 100, 7):
            low, high = count_range(today, tenths / 10)
            assert 0 <= low <= today + tenths / 10 <= high <= 2 * low + 2
