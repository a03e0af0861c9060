"""``trainctl fleet host NAME`` and ``fleet host --behind``: why a host is not on its targets.

The fleet's answer comes from the backend interface alone (the host, the job on it, the
cluster's record: ``planning.host_explain``), so it works on the simulated fleet and on Slurm.
Temporal is asked only for what trains say of themselves (paused, halted, outside their window,
when they expect to end their cycle: the ETA); with no server answering within a few seconds
the fleet's answer stands, ``eta_hours`` is null, and the command still exits 0.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable
from datetime import datetime
from typing import Any

import click
from rich.console import Console

from orchestrator.app.cli.common import (
    BadInput,
    emit,
    handle_errors,
    json_option,
    open_fleet_or_fail,
)
from orchestrator.app.cli.connection import connection_options
from orchestrator.app.cli.reach import try_connect
from orchestrator.contracts.backend import ClusterBackend, FleetBackend
from orchestrator.contracts.ui_text import plural
from orchestrator.fleet.ledger_rules import holds_planned_work
from orchestrator.planning.host_explain import (
    KINDS,
    Coverage,
    HostFacts,
    TargetAnswer,
    TrainFacts,
    coverage_of,
    eta_hours,
    explain_host,
)

#: How long the command waits for Temporal before it answers from the fleet alone.
CONNECT_TIMEOUT = 3.0
QUERY_TIMEOUT = 5.0
#: Hosts listed per blocker kind by ``--behind`` (the JSON has the counts of all).
BEHIND_SHOWN = 10


def _bad_versions(fleet: FleetBackend) -> dict[tuple[str, str], str]:
    from orchestrator.fleet.bad_versions import active_bad

    return {(c, v): why for c, v, why in active_bad(fleet)}


def _counts(b: ClusterBackend) -> tuple[int, int]:
    """(hosts out of service, hosts held for planned work by anyone) of the cluster."""
    hosts = (b.host(n) for n in b.host_names())
    planned = sum(1 for h in hosts if holds_planned_work(h.state, h.owner))
    return b.out_of_service_count(), planned


def _facts(b: ClusterBackend, cluster: str, name: str, counts: tuple[int, int]) -> HostFacts:
    h = b.host(name)
    return HostFacts(
        name=name,
        cluster=cluster,
        state=str(h.state),
        owner=h.owner,
        reason=h.reason,
        versions=dict(h.versions),
        now=b.now,
        job=b.job(h.job_id) if h.job_id is not None else None,
        repair_until=getattr(h, "repair_until", None),
        out_of_service=counts[0],
        planned=counts[1],
    )


async def _ask_trains(
    address: str | None, owners: list[str], anchor: datetime
) -> dict[str, TrainFacts] | None:
    """What each train among ``owners`` says of itself; None when no server answers."""
    from orchestrator.contracts.train_types import TrainStatus

    client = (await try_connect(address, CONNECT_TIMEOUT)).client
    if client is None:
        return None
    out: dict[str, TrainFacts] = {}
    for owner in owners:
        if not owner.startswith("train-"):
            continue
        try:
            st = await asyncio.wait_for(
                client.get_workflow_handle(owner).query("status", result_type=TrainStatus),
                QUERY_TIMEOUT,
            )
        except Exception:  # noqa: BLE001 - a train that does not answer says nothing
            continue
        out[owner] = TrainFacts(
            phase=st.state,
            reason=st.reason,
            cluster=st.cluster,
            targets=dict(st.targets),
            rollouts=tuple(
                (dict(r.targets), None if r.hosts is None else frozenset(r.hosts))
                for r in (st.rollouts or ([st.rollout] if st.rollout else []))
            ),
            window_state=st.window_state,
            next_window_hours=_fleet_hours(st.next_window_start, anchor),
            cycle_end_hours=st.cycle_projected_end_hours,
            resting=st.resting,
            rest_until_hours=st.rest_until_hours,
            waiting=st.waiting,
        )
    return out


def _train_line(train: TrainFacts) -> str:
    """What a train is doing, as ``fleet host`` shows it beside the host's targets."""
    _, ahead = train.behind_operations()
    if ahead:
        return f"{train.phase}, waiting for {' and '.join(ahead)} (parked: takes no host)"
    return train.rest_line() or train.phase


def _fleet_hours(when: datetime | None, anchor: datetime) -> float | None:
    """A train's window edge (a fleet datetime: anchor + fleet hours) as a fleet hour."""
    return None if when is None else (when - anchor).total_seconds() / 3600.0


def _answer(
    fleet: FleetBackend,
    cluster: str,
    name: str,
    cov: Coverage,
    bad: dict[tuple[str, str], str],
    trains: dict[str, TrainFacts] | None,
) -> tuple[HostFacts, list[TargetAnswer]]:
    b = fleet.peek(cluster)
    facts = _facts(b, cluster, name, _counts(b))
    return facts, explain_host(facts, cov, bad, trains or {})


def _cluster_of(fleet: FleetBackend, name: str) -> str:
    for cluster in fleet.cluster_names():
        if name in fleet.peek(cluster).host_names():
            return cluster
    raise BadInput(f"name: no host {name!r} in this fleet", field="name")


def _owners(answers: Iterable[TargetAnswer]) -> list[str]:
    return sorted({a.covered_by for a in answers if a.covered_by})


def host_report(fleet: FleetBackend, name: str, address: str | None) -> dict[str, Any]:
    """``fleet host NAME --json``."""
    cluster = _cluster_of(fleet, name)
    cov = coverage_of(ev for _, ev, _ in fleet.records(cluster=cluster))
    bad = _bad_versions(fleet)
    facts, answers = _answer(fleet, cluster, name, cov, bad, None)
    owners = sorted({*_owners(answers), f"train-{cluster}"})
    trains = asyncio.run(_ask_trains(address, owners, fleet.anchor_wall))
    if trains:
        facts, answers = _answer(fleet, cluster, name, cov, bad, trains)
    return {
        "host": name,
        "cluster": cluster,
        "state": facts.state,
        "owner": facts.owner or None,
        "reason": facts.reason,
        "job": None if facts.job is None else facts.job.id,
        "versions": dict(facts.versions),
        "targets": [a.to_json() for a in answers],
        "fleet_hours": round(facts.now, 3),
        "eta_hours": None if trains is None else eta_hours(answers, facts.now),
        "trains_asked": trains is not None,
        "trains": {o: _train_line(t) for o, t in (trains or {}).items()},
    }


def behind_report(fleet: FleetBackend, cluster: str | None, address: str | None) -> dict[str, Any]:
    """``fleet host --behind --json``: hosts not on their targets, grouped by blocker."""
    clusters = fleet.cluster_names()
    if cluster is not None:
        if cluster not in clusters:
            raise BadInput(f"cluster: unknown cluster {cluster!r}", field="cluster")
        clusters = [cluster]
    bad = _bad_versions(fleet)
    covs = {c: coverage_of(ev for _, ev, _ in fleet.records(cluster=c)) for c in clusters}
    owners = {o for cov in covs.values() for o, _ in cov.setters.values()}
    owners |= {f"train-{c}" for c in clusters}
    trains = asyncio.run(_ask_trains(address, sorted(owners), fleet.anchor_wall))
    groups: dict[str, list[dict[str, Any]]] = {}
    for c in clusters:
        b = fleet.peek(c)
        counts = _counts(b)
        for name in b.host_names():
            facts = _facts(b, c, name, counts)
            answers = [a for a in explain_host(facts, covs[c], bad, trains or {}) if a.blocked_by]
            if not answers:
                continue
            first = min(answers, key=lambda a: KINDS.index(a.blocked_by.kind))  # type: ignore[union-attr]
            assert first.blocked_by is not None
            since = [a.since_hours for a in answers if a.since_hours is not None]
            groups.setdefault(first.blocked_by.kind, []).append(
                {
                    "host": name,
                    "cluster": c,
                    "lacks": {a.component: a.want for a in answers},
                    "detail": first.blocked_by.detail,
                    "until_hours": first.blocked_by.until_hours,
                    "waiting_since_hours": min(since) if since else None,
                }
            )
    out = []
    for kind in sorted(groups, key=KINDS.index):
        hosts = sorted(
            groups[kind],
            key=lambda h: (
                h["waiting_since_hours"] is None,
                h["waiting_since_hours"] or 0.0,
                h["host"],
            ),
        )
        out.append({"kind": kind, "count": len(hosts), "hosts": hosts})
    return {
        "clusters": clusters,
        "behind": sum(g["count"] for g in out),
        "groups": out,
        "trains_asked": trains is not None,
    }


def _print_host(o: dict[str, Any]) -> None:
    con = Console(soft_wrap=True)
    con.print(f"[bold]{o['host']}[/] ({o['cluster']}) at fleet hour {o['fleet_hours']}")
    con.print(f"state: {o['state']}" + (f" (owner {o['owner']})" if o["owner"] else ""))
    if o["reason"]:
        con.print(f"reason: {o['reason']}")
    if o["job"] is not None:
        con.print(f"job: {o['job']}")
    if not o["targets"]:
        con.print("targets: none recorded for this cluster (no train or operation covers it)")
    for t in o["targets"]:
        by = t["covered_by"] or "nobody"
        if t["blocked_by"] is None:
            con.print(f"- {t['component']}: {t['want']} (on target; {by})")
            continue
        blk = t["blocked_by"]
        con.print(f"- {t['component']}: {t['have']} -> {t['want']} ({by})")
        con.print(f"  blocked by {blk['kind']}: {blk['detail']}")
    for owner, says in o.get("trains", {}).items():
        con.print(f"{owner}: {says}")
    if not o["trains_asked"]:
        con.print("eta: unknown (no Temporal server answered; the fleet's answer above)")
    elif o["eta_hours"] is not None:
        con.print(f"eta: fleet hour {o['eta_hours']:.1f}")
    else:
        con.print("eta: unknown (a blocker has no known end)")


def _print_behind(o: dict[str, Any]) -> None:
    con = Console(soft_wrap=True)
    where = ", ".join(o["clusters"])
    con.print(f"[bold]{plural(o['behind'], 'host')}[/] not on their targets ({where})")
    for g in o["groups"]:
        con.print(f"[bold]{g['kind']}[/]: {plural(g['count'], 'host')}, longest waiting first")
        for h in g["hosts"][:BEHIND_SHOWN]:
            since = h["waiting_since_hours"]
            waited = f"since fleet hour {since:.1f}" if since is not None else "since unknown"
            con.print(f"- {h['host']} ({waited}): {h['detail']}")
        if g["count"] > BEHIND_SHOWN:
            con.print(f"  ... and {g['count'] - BEHIND_SHOWN:,} more (use --json for all)")
    if not o["trains_asked"]:
        con.print("(no Temporal server answered: trains' pauses and windows not shown)")


@click.command("host")
@click.argument("name", required=False)
@click.option("--behind", is_flag=True, help="Every host not on its targets, by blocker.")
@click.option("--cluster", default=None, help="With --behind: only this cluster.")
@connection_options
@json_option
@handle_errors
def host(
    name: str | None, behind: bool, cluster: str | None, address: str | None, as_json: bool
) -> None:
    """Why a host is not on its targets, and what will move it (or, with --behind, every host
    that is not, grouped by what blocks it, longest waiting first)."""
    if behind == (name is not None):
        raise BadInput("name: give a host NAME or --behind (not both)", field="name")
    if cluster is not None and not behind:
        raise BadInput("cluster: only with --behind", field="cluster")
    fleet = open_fleet_or_fail(read_only=True)
    try:
        if behind:
            emit(behind_report(fleet, cluster, address), as_json, _print_behind)
        else:
            assert name is not None
            emit(host_report(fleet, name, address), as_json, _print_host)
    finally:
        fleet.close()
