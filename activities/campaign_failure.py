"""Activities of a campaign's failure path: name the change behind a failed stage (blame, and
marking it bad fleet-wide), and roll it back (which hosts carry it and what they had before; hosts
the bad build quarantined reclaimed and reinstalled).

A part of ``CampaignActivities`` (a base class, kept apart for size): blame reads the fleet and
its record through the backend interface and asks Temporal which campaigns are in flight.
"""

from __future__ import annotations

import asyncio
import contextlib

from temporalio import activity
from temporalio.client import Client

from activities.fleet_access import FleetAccess
from orchestrator.campaign.client import WORKFLOW_NAME
from orchestrator.contracts.campaign_spec import campaign_workflow_id
from orchestrator.contracts.campaign_types import (
    BlameRequest,
    BlameResult,
    CampaignStatus,
    ClusterRollback,
    ReclaimRequest,
    ReclaimResult,
    RollbackGroup,
    RollbackPlan,
    RollbackPlanRequest,
)
from orchestrator.contracts.constants import HELD_STATES
from orchestrator.contracts.models import HostState
from orchestrator.execution import settle
from orchestrator.execution.install import install_hosts
from orchestrator.fleet.bad_versions import active_bad, mark_bad
from orchestrator.planning.blame import HostOutcome, rank_blame, verifications
from orchestrator.planning.rollback import Install, plan_rollback, previous_versions

#: A suspect explaining at least this much (F1 of carrying it vs failing) is marked bad.
BLAME_MARK_SCORE = 0.5
#: Campaigns in flight blame asks about (the rest are left out), and how long it asks.
FLIGHTS_LIMIT = 50
FLIGHTS_TIMEOUT = 10.0


class CampaignFailureActivities(FleetAccess):
    client: Client

    def _bad(self) -> list[tuple[str, str, str]]:
        return active_bad(self.fleet)

    @activity.defn(name="campaign_blame")
    async def blame(self, req: BlameRequest) -> BlameResult:
        """Blame (below) with every campaign in flight known, so each suspect is attributed
        to the rollout that installs it."""
        flights = await self._flights(req.campaign, req.targets)
        return await asyncio.to_thread(self._blame, req, flights)

    async def _flights(self, ours: str, targets: dict[str, str]) -> dict[str, dict[str, str]]:
        """campaign name -> targets of every running campaign (ours at least), from Temporal;
        a campaign that does not answer in time is left out."""
        flights = {ours: dict(targets)}
        query = f'WorkflowType = "{WORKFLOW_NAME}" AND ExecutionStatus = "Running"'
        with contextlib.suppress(Exception):  # attribution is a nicety: blame goes on without
            async with asyncio.timeout(FLIGHTS_TIMEOUT):
                async for wf in self.client.list_workflows(query, limit=FLIGHTS_LIMIT):
                    if wf.id == campaign_workflow_id(ours):
                        continue
                    handle = self.client.get_workflow_handle(wf.id)
                    status = await handle.query("status", result_type=CampaignStatus)
                    flights[status.name] = dict(status.targets)
        return flights

    def _blame(self, req: BlameRequest, flights: dict[str, dict[str, str]]) -> BlameResult:
        """Which component=version broke the stage's hosts, from versions and verification only.

        The stage's failed hosts fail; its hosts in service pass (changed or not yet: those that
        lack a pair are what makes it suspect). The top suspect, when it is one of this
        campaign's targets and explains most failures (score >= ``BLAME_MARK_SCORE``), is
        marked bad fleet-wide, so no train or operation installs it again until cleared.
        """
        outcomes: list[HostOutcome] = []
        new_pairs = {pair for targets in flights.values() for pair in targets.items()}
        for cs in req.clusters:
            b = self.peek(cs.cluster, req.wall)
            failed = set(cs.failed)
            names = cs.hosts if cs.hosts is not None else b.host_names()
            for name in names:
                h = b.host(name)
                if name in failed and h.state == HostState.IN_SERVICE:
                    continue  # failed, then reimaged by repair: the record's verification says
                if name in failed:
                    outcomes.append(HostOutcome(name, dict(h.versions), False))
                elif h.state == HostState.IN_SERVICE:
                    outcomes.append(HostOutcome(name, dict(h.versions), True))
            # Verifications on a version in flight that the hosts no longer show (an operation
            # rolled its failed wave back): the record keeps what they had then.
            record = (
                (str(ev.host), ev.kind, ev.detail)
                for _, ev, _ in self.fleet.records(cluster=cs.cluster)
                if ev.host is not None
            )
            current = {n: b.host(n).versions for n in names}
            outcomes += [
                o for o in verifications(current, record) if new_pairs & set(o.versions.items())
            ]
        # One observation per host and set of versions: failed if it ever failed on them.
        merged: dict[tuple[str, tuple[tuple[str, str], ...]], HostOutcome] = {}
        for o in outcomes:
            key = (o.name, tuple(sorted(o.versions.items())))
            if key not in merged or not o.passed:
                merged[key] = o
        ranked = rank_blame(merged.values(), flights)
        out = BlameResult(blame=ranked)
        top = ranked[0] if ranked else None
        if top is None or top.campaign != req.campaign or top.score < BLAME_MARK_SCORE:
            return out
        out.blamed = {top.component: top.version}
        why = (  # every backend's store keeps the list of bad versions
            f"campaign {req.campaign}, stage {req.stage}: {top.failing} of "
            f"{top.failing + top.passing} hosts carrying it failed (blame score {top.score})"
        )
        _, new = mark_bad(self.fleet, top.component, top.version, why, f"campaign-{req.campaign}")
        if new:
            out.marked.append(f"{top.component}={top.version}")
        return out

    @activity.defn(name="campaign_rollback_plan")
    def rollback_plan(self, req: RollbackPlanRequest) -> RollbackPlan:
        """The hosts of each cluster carrying a blamed version, and the versions each had
        before (from the record's installs); a blamed version recorded as the cluster's target
        is forgotten, so repair reimages no host with it."""
        out = RollbackPlan()
        for cluster in req.clusters:
            installs = [
                Install(str(ev.host), ev.detail.get("before") or {}, ev.detail.get("after") or {})
                for _, ev, _ in self.fleet.records(cluster=cluster)
                if ev.kind == "updated" and ev.host is not None
            ]
            previous = previous_versions(installs, req.blamed)
            with self.cluster(cluster, req.wall) as b:
                recorded = b.recorded_targets()
                stale = [c for c, v in req.blamed.items() if recorded.get(c) == v]
                if stale:
                    b.unset_targets(stale, req.campaign)
                hosts = [(h.name, h.state, h.versions) for h in map(b.host, b.host_names())]
                planned = plan_rollback(hosts, previous, req.blamed)
            out.clusters.append(
                ClusterRollback(
                    cluster=cluster,
                    groups=[RollbackGroup(targets=t, hosts=h) for t, h in planned.groups],
                    reclaim=planned.reclaim,
                    unknown=planned.unknown,
                )
            )
        return out

    @activity.defn(name="campaign_reclaim")
    def reclaim(self, req: ReclaimRequest) -> ReclaimResult:
        """Take hosts the bad build put out of service back from quarantine and reinstall their
        previous versions (one transaction); a failed reinstall quarantines the host again."""
        with self.cluster(req.cluster, req.wall) as b:
            out = ReclaimResult(fleet_hours=b.now)
            mine: dict[str, dict[str, str]] = {}
            for name, targets in sorted(req.previous.items()):
                if b.reclaim(name, req.owner, req.reason):
                    mine[name] = targets
                    continue
                h = b.host(name)
                if h.owner == req.owner and h.state in HELD_STATES:
                    # Reclaimed by an earlier attempt of this activity whose result was lost
                    # (the worker died after it committed): ours already, carry on with it.
                    mine[name] = targets
                    continue
                out.left[name] = f"{h.state}: {h.reason}".strip()
                if b.set_reimage(name, targets, req.owner):  # repair gives it them instead
                    out.left[name] += f" (its reimage after repair gives it {targets})"
            res = install_hosts(b, req.owner, mine, rollback=True, on_host=_beat)
            settle.quarantine_hosts(b, req.owner, res.failed, f"{req.owner}: rollback failed")
            out.updated, out.failed = res.updated, res.failed
            out.duration_hours = res.duration_hours
            return out


def _beat(_host: str) -> None:
    activity.heartbeat()
