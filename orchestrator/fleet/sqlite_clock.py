"""The logical clocks of a fleet at speed ``max``: one per cluster, moved by turns, in SQL rows.

A fleet that never waits still needs time to pass in a reproducible order. Each cluster's clock
(its row in ``clocks``) stands still while any of its parties (the workflows that act on it, in
``clock_parties``) is acting; when all of them wait, the one waiting for the earliest instant
gets its turn and the clock jumps there. That is how a discrete-event simulator orders
simultaneous events, so outcomes do not depend on which worker ran first.

These functions run inside the store's write transaction (``SqliteFleet._tx``): registering a
wait and giving the next turn is one step, so two parties never both take a turn.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from typing import Any

from orchestrator.contracts.backend import ClockMember, ClockRelease, ClockTurn
from orchestrator.contracts.errors import UnknownCluster

#: A party of a logical clock that was given its turn and has not waited again for this long
#: (wall seconds) is taken for gone (its workflow crashed or ended without leaving) and dropped,
#: so it cannot hold its cluster's clock forever. Waiting parties never block a clock: one whose
#: workflow is gone is dropped when its turn comes and nobody can be told.
CLOCK_BUSY_TIMEOUT_SECONDS = 120.0


def clock_now(conn: sqlite3.Connection, cluster: str) -> float:
    """The fleet hour ``cluster``'s logical clock stands at; UnknownCluster if it has none."""
    row = conn.execute("SELECT now FROM clocks WHERE cluster=?", (cluster,)).fetchone()
    if row is None:
        raise UnknownCluster(f"cluster: unknown cluster {cluster!r}", field="cluster")
    return float(row[0])


def set_clock(conn: sqlite3.Connection, cluster: str, hours: float) -> None:
    conn.execute("UPDATE clocks SET now=? WHERE cluster=?", (hours, cluster))


def wait(
    conn: sqlite3.Connection,
    cluster: str,
    party: ClockMember,
    epoch: str,
    target_hours: float | None,
    children: Sequence[str] | None,
    wakes: Sequence[str],
    now: float,
    seen: float,
) -> ClockTurn:
    """Register ``party``'s wait for ``target_hours`` at fleet hour ``now`` (wall time ``seen``)
    and step the clock (see ``FleetBackend.clock_wait``)."""
    if children is not None:
        _adopt(conn, cluster, party, children, seen)
    row = conn.execute(
        "SELECT epoch, waiting FROM clock_parties WHERE cluster=? AND party=?",
        (cluster, party.key),
    ).fetchone()
    if epoch and row is not None and row[0] == epoch:
        if not row[1]:  # released for this very wait: it is this party's turn
            return ClockTurn(now=now, released=True)
        conn.execute(
            "UPDATE clock_parties SET seen=? WHERE cluster=? AND party=?",
            (seen, cluster, party.key),
        )
    else:
        conn.execute(
            "INSERT OR REPLACE INTO clock_parties VALUES (?,?,?,?,?,?,?,1,?,?)",
            (
                cluster,
                party.key,
                party.workflow_id,
                party.owner,
                party.parent,
                party.rank,
                epoch,
                target_hours,
                seen,
            ),
        )
    for key in wakes:
        conn.execute(
            "UPDATE clock_parties SET target=? WHERE cluster=? AND party=? AND waiting=1 "
            "AND target > ?",
            (now, cluster, key, now),
        )
    released = _step(conn, cluster, now, seen)
    mine = any(r.party == party.key and r.epoch == epoch for r in released)
    now = max([now, *(r.now for r in released)])
    others = tuple(r for r in released if r.party != party.key)
    return ClockTurn(now=now, released=mine, others=others)


def leave(
    conn: sqlite3.Connection, cluster: str, party: str | None, owner: str | None, seen: float
) -> tuple[ClockRelease, ...]:
    """Remove ``party`` (or every party of ``owner``) from ``cluster``'s clock and step it."""
    if party is not None:
        conn.execute("DELETE FROM clock_parties WHERE cluster=? AND party=?", (cluster, party))
    if owner is not None:
        conn.execute("DELETE FROM clock_parties WHERE cluster=? AND owner=?", (cluster, owner))
    return tuple(_step(conn, cluster, clock_now(conn, cluster), seen))


def parties(conn: sqlite3.Connection, cluster: str) -> list[dict[str, Any]]:
    """The parties of ``cluster``'s clock, in turn order (for status and tests)."""
    cols = ("party", "workflow_id", "owner", "parent", "rank", "epoch", "waiting", "target")
    rows = conn.execute(
        f"SELECT {', '.join(cols)} FROM clock_parties WHERE cluster=? "
        "ORDER BY waiting, target IS NULL, target, rank, party",
        (cluster,),
    )
    return [dict(zip(cols, r, strict=True)) for r in rows]


def _adopt(
    conn: sqlite3.Connection,
    cluster: str,
    parent: ClockMember,
    children: Sequence[str],
    seen: float,
) -> None:
    """``children`` are every party ``parent`` started that still runs: others leave, and
    missing ones join as acting (they hold the clock until they first wait)."""
    known = {
        r[0]
        for r in conn.execute(
            "SELECT party FROM clock_parties WHERE cluster=? AND parent=?",
            (cluster, parent.key),
        )
    }
    gone = known - set(children)
    conn.executemany(
        "DELETE FROM clock_parties WHERE cluster=? AND party=?",
        [(cluster, k) for k in sorted(gone)],
    )
    conn.executemany(
        "INSERT OR IGNORE INTO clock_parties VALUES (?,?,?,?,?,0,'',0,NULL,?)",
        [(cluster, k, k, parent.owner, parent.key, seen) for k in children],
    )


def _step(conn: sqlite3.Connection, cluster: str, now: float, seen: float) -> list[ClockRelease]:
    """Give the next turn if nobody is acting: to the party waiting for the earliest instant
    (then the lower rank, then the name), moving the clock there."""
    stale = seen - CLOCK_BUSY_TIMEOUT_SECONDS
    conn.execute(
        "DELETE FROM clock_parties WHERE cluster=? AND waiting=0 AND seen < ?",
        (cluster, stale),
    )
    acting = conn.execute(
        "SELECT 1 FROM clock_parties WHERE cluster=? AND waiting=0 LIMIT 1", (cluster,)
    ).fetchone()
    if acting is not None:
        return []
    row = conn.execute(
        "SELECT party, workflow_id, epoch, target FROM clock_parties "
        "WHERE cluster=? AND waiting=1 AND target IS NOT NULL "
        "ORDER BY target, rank, party LIMIT 1",
        (cluster,),
    ).fetchone()
    if row is None:
        return []
    key, workflow_id, epoch, target = row
    if target > now:
        now = float(target)
        set_clock(conn, cluster, now)
    conn.execute(
        "UPDATE clock_parties SET waiting=0, seen=? WHERE cluster=? AND party=?",
        (seen, cluster, key),
    )
    return [ClockRelease(party=key, workflow_id=workflow_id, epoch=epoch, now=now)]
