"""The circuit breakers' state in the fleet store (``breaker_log``), and the failures they count.

The count is read from the fleet's append-only event log, so it sees every owner's failures on
both backends alike: a host whose state became ``quarantined``, or whose verification did not
pass, counts once within the window, whatever a repair did to it later. The window ends at the
cluster's latest recorded event (its fleet clock as far as the record knows) and reaches back
``window`` fleet hours.

The breaker's own record is append-only too: ``trip`` rows open it (checked and written in one
transaction, the cluster's row locked on PostgreSQL, so two workers that see the same burst
open it once), ``paused`` rows name each workflow it paused, a ``reset`` row closes it, naming
who, why and what it resumed.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime

from sqlalchemy import Connection, and_, func, or_, select

from orchestrator.contracts.breaker_types import BreakerReset, BreakerSettings, BreakerView
from orchestrator.contracts.models import HostState
from orchestrator.fleet.store_db import Database
from orchestrator.fleet.store_schema import breaker_log, clusters, events, meta

#: ``meta`` key of the simulated fleet's breaker settings (JSON of ``BreakerSettings``).
SETTINGS_KEY = "breaker"

_FAILED = or_(
    and_(
        events.c.kind == "host_state",
        events.c.detail.like(f'%"after": "{HostState.QUARANTINED.value}"%'),
    ),
    and_(events.c.kind == "verified", events.c.detail.like('%"passed": false%')),
)


def breaker_settings(db: Database, cluster: str) -> BreakerSettings:
    """The cluster's settings: its Slurm backend config's ``breaker``, else the fleet's."""
    rows = dict(db.read(select(meta.c.key, meta.c.value)))
    if "slurm_clusters" in rows or "backend_config" in rows:
        from orchestrator.fleet.slurm.fleet import members_of

        for member in members_of(rows):
            if member.cluster == cluster:
                return member.config.breaker
    raw = rows.get(SETTINGS_KEY)
    return BreakerSettings.model_validate_json(raw) if raw else BreakerSettings()


def cluster_names(db: Database) -> list[str]:
    return [str(r[0]) for r in db.read(select(clusters.c.name).order_by(clusters.c.name))]


def _latest(conn: Connection, cluster: str) -> float | None:
    """The cluster's fleet hour as far as its record goes (its latest event)."""
    t = conn.execute(select(func.max(events.c.t)).where(events.c.cluster == cluster)).scalar()
    return None if t is None else float(t)


def failing_hosts(
    conn: Connection, cluster: str, window_hours: float, after: float | None = None
) -> list[str]:
    """Hosts of ``cluster`` that failed within the window ending at its latest event (and
    after fleet hour ``after``: what the last reset forgave does not count again)."""
    latest = _latest(conn, cluster)
    if latest is None:
        return []
    start = latest - window_hours
    stmt = (
        select(events.c.host)
        .where(events.c.cluster == cluster, events.c.t >= start, _FAILED)
        .distinct()
    )
    if after is not None:
        stmt = stmt.where(events.c.t > after)
    return sorted(str(r[0]) for r in conn.execute(stmt) if r[0] is not None)


def _rows(conn: Connection, cluster: str) -> list[tuple[str, float, str, str, str]]:
    stmt = (
        select(
            breaker_log.c.action,
            breaker_log.c.wall,
            breaker_log.c.who,
            breaker_log.c.reason,
            breaker_log.c.detail,
        )
        .where(breaker_log.c.cluster == cluster)
        .order_by(breaker_log.c.seq)
    )
    return [(str(a), float(w), str(who), str(r), str(d)) for a, w, who, r, d in conn.execute(stmt)]


def _at(wall: float) -> datetime:
    return datetime.fromtimestamp(wall, UTC)


def _view(conn: Connection, cluster: str, settings: BreakerSettings) -> BreakerView:
    view = BreakerView(
        cluster=cluster, max_failures=settings.max_failures, window_hours=settings.window_hours
    )
    forgiven: float | None = None  # the fleet hour of the last reset
    for action, wall, who, reason, detail in _rows(conn, cluster):
        if action == "trip":
            view.state, view.opened_at, view.reason, view.paused = "open", _at(wall), reason, []
        elif action == "paused":
            view.paused.append(json.loads(detail)["workflow"])
        elif action == "reset":
            resumed = json.loads(detail).get("resumed", [])
            forgiven = json.loads(detail).get("fleet_hour")
            view.last_reset = BreakerReset(who=who, reason=reason, at=_at(wall), resumed=resumed)
            view.state, view.paused = "closed", []
    view.failing_hosts = failing_hosts(conn, cluster, settings.window_hours, forgiven)
    view.failures_in_window = len(view.failing_hosts)
    return view


def breaker_view(db: Database, cluster: str) -> BreakerView:
    """Where ``cluster``'s breaker stands now."""
    settings = breaker_settings(db, cluster)
    with db.snapshot() as conn:
        return _view(conn, cluster, settings)


def trip_if_due(db: Database, cluster: str, wall: float) -> tuple[BreakerView, bool]:
    """Open the breaker when the window holds more failures than it tolerates; (the view,
    whether this call opened it)."""
    settings = breaker_settings(db, cluster)
    with db.tx(cluster) as conn:
        view = _view(conn, cluster, settings)
        if view.state == "open" or view.failures_in_window <= settings.max_failures:
            return view, False
        view.reason = (
            f"{view.failures_in_window} hosts failed within {settings.window_hours:g} fleet hours "
            f"(at most {settings.max_failures} tolerated): {', '.join(view.failing_hosts[:5])}"
            + (" ..." if view.failures_in_window > 5 else "")
        )
        detail = json.dumps({"hosts": view.failing_hosts})
        _append(conn, cluster, wall, "trip", "trainctl", view.reason, detail)
        view.state, view.opened_at = "open", _at(wall)
        return view, True


def note_paused(db: Database, cluster: str, workflow_ids: list[str], wall: float) -> None:
    """The breaker paused these workflows (a reset resumes exactly them)."""
    with db.tx(cluster) as conn:
        for wid in workflow_ids:
            _append(conn, cluster, wall, "paused", "trainctl", "", json.dumps({"workflow": wid}))


def note_reset(
    db: Database, cluster: str, who: str, reason: str, resumed: list[str], wall: float
) -> BreakerReset:
    """Close the breaker: who, why, and what was resumed. The failures recorded so far are
    forgiven: only later ones can open it again."""
    with db.tx(cluster) as conn:
        detail = {"resumed": resumed, "fleet_hour": _latest(conn, cluster)}
        _append(conn, cluster, wall, "reset", who, reason, json.dumps(detail))
    return BreakerReset(who=who, reason=reason, at=_at(wall), resumed=resumed)


def _append(
    conn: Connection, cluster: str, wall: float, action: str, who: str, reason: str, detail: str
) -> None:
    conn.execute(
        breaker_log.insert(),
        {
            "cluster": cluster,
            "wall": wall,
            "action": action,
            "who": who,
            "reason": reason,
            "detail": detail,
        },
    )


def set_breaker_settings(db: Database, settings: BreakerSettings) -> None:
    """The simulated fleet's breaker settings (``fleet init``), for every cluster."""
    with db.tx() as conn:
        conn.execute(meta.delete().where(meta.c.key == SETTINGS_KEY))
        conn.execute(
            meta.insert(), {"key": SETTINGS_KEY, "value": settings.model_dump_json(by_alias=False)}
        )
