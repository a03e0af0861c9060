"""The logical clocks of a fleet at speed ``max``: one per cluster, moved by turns, in SQL rows.

A fleet that never waits still needs time to pass in a reproducible order. Each cluster's clock
(its row in ``clocks``) stands still while any of its parties (the workflows that act on it, in
``clock_parties``) is acting; when all of them wait, the one waiting for the earliest instant
gets its turn and the clock jumps there. That is how a discrete-event simulator orders
simultaneous events, so outcomes do not depend on which worker ran first.

These functions run inside the store's write transaction on the cluster (``store_db.tx``,
which on PostgreSQL first locks the cluster's ``clocks`` row): registering a wait and giving
the next turn is one step, so two parties never both take a turn, from any machine.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sqlalchemy import BindParameter, Connection, and_, bindparam, select

from orchestrator.contracts.backend import ClockMember, ClockRelease, ClockTurn
from orchestrator.contracts.errors import UnknownCluster
from orchestrator.fleet.store_db import insert_missing, upsert
from orchestrator.fleet.store_schema import clock_parties as cp
from orchestrator.fleet.store_schema import clocks

_CLUSTER: BindParameter[str] = bindparam("b_cluster")
_PARTY = and_(cp.c.cluster == _CLUSTER, cp.c.party == bindparam("b_party"))
_NOW = select(clocks.c.now).where(clocks.c.cluster == _CLUSTER)
_SET = clocks.update().where(clocks.c.cluster == _CLUSTER).values(now=bindparam("b_now"))
_MINE = select(cp.c.epoch, cp.c.waiting).where(_PARTY)
_SEEN = cp.update().where(_PARTY).values(seen=bindparam("b_seen"))
_WAKE = (
    cp.update()
    .where(_PARTY, cp.c.waiting == 1, cp.c.target > bindparam("b_now"))
    .values(target=bindparam("b_now"))
)
_DROP = cp.delete().where(_PARTY)
_DROP_OWNER = cp.delete().where(cp.c.cluster == _CLUSTER, cp.c.owner == bindparam("b_owner"))
_CHILDREN = select(cp.c.party).where(cp.c.cluster == _CLUSTER, cp.c.parent == bindparam("b_parent"))
_STALE = cp.delete().where(
    cp.c.cluster == _CLUSTER, cp.c.waiting == 0, cp.c.seen < bindparam("b_stale")
)
_OTHER = (
    select(cp.c.party).where(cp.c.cluster == _CLUSTER, cp.c.party != bindparam("b_party")).limit(1)
)
_ACTING = select(cp.c.party).where(cp.c.cluster == _CLUSTER, cp.c.waiting == 0).limit(1)
_NEXT = (
    select(cp.c.party, cp.c.workflow_id, cp.c.epoch, cp.c.target)
    .where(cp.c.cluster == _CLUSTER, cp.c.waiting == 1, cp.c.target.is_not(None))
    .order_by(cp.c.target, cp.c.rank, cp.c.party)
    .limit(1)
)
_TURN = cp.update().where(_PARTY).values(waiting=0, seen=bindparam("b_seen"))
_PARTY_COLUMNS = ("party", "workflow_id", "owner", "parent", "rank", "epoch", "waiting", "target")
_PARTIES = (
    select(*(cp.c[c] for c in _PARTY_COLUMNS))
    .where(cp.c.cluster == _CLUSTER)
    .order_by(cp.c.waiting, cp.c.target.is_(None), cp.c.target, cp.c.rank, cp.c.party)
)

#: A party of a logical clock that was given its turn and has not waited again for this long
#: (wall seconds) is taken for gone (its workflow crashed or ended without leaving) and dropped,
#: so it cannot hold its cluster's clock forever. Waiting parties never block a clock: one whose
#: workflow is gone is dropped when its turn comes and nobody can be told.
CLOCK_BUSY_TIMEOUT_SECONDS = 120.0


def clock_now(conn: Connection, cluster: str) -> float:
    """The fleet hour ``cluster``'s logical clock stands at; UnknownCluster if it has none."""
    row = conn.execute(_NOW, {"b_cluster": cluster}).first()
    if row is None:
        raise UnknownCluster(f"cluster: unknown cluster {cluster!r}", field="cluster")
    return float(row[0])


def set_clock(conn: Connection, cluster: str, hours: float) -> None:
    conn.execute(_SET, {"b_cluster": cluster, "b_now": hours})


def wait(
    conn: Connection,
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
    key = {"b_cluster": cluster, "b_party": party.key}
    row = conn.execute(_MINE, key).first()
    if epoch and row is not None and row[0] == epoch:
        if not row[1]:  # released for this very wait: it is this party's turn
            return ClockTurn(now=now, released=True, alone=_alone(conn, cluster, party.key))
        conn.execute(_SEEN, {**key, "b_seen": seen})
    else:
        upsert(
            conn,
            cp,
            [
                {
                    "cluster": cluster,
                    "party": party.key,
                    "workflow_id": party.workflow_id,
                    "owner": party.owner,
                    "parent": party.parent,
                    "rank": party.rank,
                    "epoch": epoch,
                    "waiting": 1,
                    "target": target_hours,
                    "seen": seen,
                }
            ],
        )
    if wakes:
        conn.execute(_WAKE, [{"b_cluster": cluster, "b_party": k, "b_now": now} for k in wakes])
    released = _step(conn, cluster, now, seen)
    mine = any(r.party == party.key and r.epoch == epoch for r in released)
    now = max([now, *(r.now for r in released)])
    others = tuple(r for r in released if r.party != party.key)
    return ClockTurn(now=now, released=mine, others=others, alone=_alone(conn, cluster, party.key))


def _alone(conn: Connection, cluster: str, key: str) -> bool:
    """No party but ``key`` on ``cluster``'s clock."""
    return conn.execute(_OTHER, {"b_cluster": cluster, "b_party": key}).first() is None


def leave(
    conn: Connection, cluster: str, party: str | None, owner: str | None, seen: float
) -> tuple[ClockRelease, ...]:
    """Remove ``party`` (or every party of ``owner``) from ``cluster``'s clock and step it."""
    if party is not None:
        conn.execute(_DROP, {"b_cluster": cluster, "b_party": party})
    if owner is not None:
        conn.execute(_DROP_OWNER, {"b_cluster": cluster, "b_owner": owner})
    return tuple(_step(conn, cluster, clock_now(conn, cluster), seen))


def parties(rows: Sequence[Any]) -> list[dict[str, Any]]:
    """The rows of ``PARTIES`` (a cluster's parties in turn order) as dicts, for status and
    tests."""
    return [dict(zip(_PARTY_COLUMNS, r, strict=True)) for r in rows]


#: The parties of one cluster's clock (parameter ``b_cluster``), in turn order.
PARTIES = _PARTIES


def _adopt(
    conn: Connection,
    cluster: str,
    parent: ClockMember,
    children: Sequence[str],
    seen: float,
) -> None:
    """``children`` are every party ``parent`` started that still runs: others leave, and
    missing ones join as acting (they hold the clock until they first wait)."""
    known = {r[0] for r in conn.execute(_CHILDREN, {"b_cluster": cluster, "b_parent": parent.key})}
    gone = known - set(children)
    if gone:
        conn.execute(_DROP, [{"b_cluster": cluster, "b_party": k} for k in sorted(gone)])
    insert_missing(
        conn,
        cp,
        [
            {
                "cluster": cluster,
                "party": k,
                "workflow_id": k,
                "owner": parent.owner,
                "parent": parent.key,
                "rank": 0,
                "epoch": "",
                "waiting": 0,
                "target": None,
                "seen": seen,
            }
            for k in children
        ],
    )


def _step(conn: Connection, cluster: str, now: float, seen: float) -> list[ClockRelease]:
    """Give the next turn if nobody is acting: to the party waiting for the earliest instant
    (then the lower rank, then the name), moving the clock there."""
    stale = seen - CLOCK_BUSY_TIMEOUT_SECONDS
    key = {"b_cluster": cluster}
    conn.execute(_STALE, {**key, "b_stale": stale})
    if conn.execute(_ACTING, key).first() is not None:
        return []
    row = conn.execute(_NEXT, key).first()
    if row is None:
        return []
    party, workflow_id, epoch, target = row
    if target > now:
        now = float(target)
        set_clock(conn, cluster, now)
    conn.execute(_TURN, {**key, "b_party": party, "b_seen": seen})
    return [ClockRelease(party=party, workflow_id=workflow_id, epoch=epoch, now=now)]
