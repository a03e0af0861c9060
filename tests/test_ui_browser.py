"""The Temporal UI tells the on-call story: a real Chromium opens the dev server's Web UI.

One fleet of the ``multi`` preset, one scenario per cluster so none waits for another:

- ``c00``: a train whose first domains drain, every job on them answering "wait for my next
  checkpoint" when asked (negotiation), and a CUDA upgrade waiting for the train to hand the
  cluster over;
- ``c01``: a train on a bad build (an injected fault at rate 1), halted after its failures;
- ``c02``: a campaign whose canary is done and whose Prometheus gate (an address nobody
  listens on) holds it;
- ``c03``: a bulk operation aborted by its operator.

Debian's ``/usr/bin/chromium``, driven by playwright (no browser download), opens each one's
page (its User Metadata tab: the summary and the current details, markdown inside frames) and
the workflow list, in one browser session, and reads what the UI renders: every figure is held
against the workflow's own query, every halted or held page must end with the command that
moves it on, and no page may draw a markdown table (the UI draws them without padding, so
columns ran together). A screenshot of each page goes to the test's temporary directory
(printed). The dev server here has its Web UI on, unlike ``dev_env``. Every workflow the test
started is stopped or aborted at the end (trains hand their hosts back), so the fleet record
passes the audit. Two tests without a browser pin the page texts this test made right (a halted
train's hosts in maintenance, a held campaign's error and query).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import re
import socket
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest_asyncio
from playwright.async_api import Page, async_playwright
from temporalio.client import Client, WorkflowExecutionStatus
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.service import RPCError
from temporalio.testing import WorkflowEnvironment

from orchestrator.app.worker import build_worker
from orchestrator.campaign.client import campaign_status, control_campaign, start_campaign
from orchestrator.campaign.progress import new_status
from orchestrator.campaign.ui import campaign_details
from orchestrator.contracts.campaign_spec import CampaignSpec
from orchestrator.contracts.campaign_types import CampaignState, StagePlanModel
from orchestrator.contracts.messages import CycleCounts
from orchestrator.contracts.paths import temporal_cli_path
from orchestrator.contracts.search_attributes import SEARCH_ATTRIBUTES
from orchestrator.contracts.train_spec import TrainSpec
from orchestrator.contracts.train_types import TrainState
from orchestrator.contracts.ui_text import plural
from orchestrator.fleet import SqliteFleet
from orchestrator.ops import parse_spec_text
from orchestrator.ops.client import (
    control_operation,
    final_status,
    operation_handle,
    operation_status,
    start_operation,
)
from orchestrator.train.client import control_train, train_handle, train_status
from orchestrator.train.client import start_train as _start_train
from orchestrator.train.status import TrainStatus
from orchestrator.train.status import train_status as status_of
from orchestrator.train.ui import train_details
from tests.train_helpers import make_fleet, spec

CHROMIUM = "/usr/bin/chromium"
#: Two fleet minutes per wall second: a bad build's first verification fails within a minute or
#: two, a canary of one idle host is done as soon; the draining jobs' checkpoints are moved far
#: enough ahead (``CHECKPOINT_AHEAD``) that their domain still drains while the test looks.
SPEED = 120.0
#: Fleet hours from the test's start to every c00 job's next checkpoint (5 min of wall time).
CHECKPOINT_AHEAD = 10.0
#: How long a page may take to show what it must (the UI polls; a loaded CI machine is slow).
PAGE_WAIT = 90.0
#: How long a scenario may take to reach the state its page shows (halted, held, negotiated).
STATE_WAIT = 150.0
#: The bad build the c01 train installs.
BAD = ("nic_firmware", "28.41.1000")
#: Text of a markdown table, and columns of one the UI drew without padding (issue 25).
RUN_TOGETHER = ("|---", "| ---", "holdsgrantedwants", "Draining0/", "pendingc00")
NEGOTIATED = re.compile(
    r"asked (\d+)x to stop at ([\d.]+): wait \(wait for my next checkpoint\); refused 0x; "
    r"evict at fleet hour ([\d.]+)"
)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest_asyncio.fixture(loop_scope="session")
async def ui_env() -> AsyncIterator[tuple[WorkflowEnvironment, str]]:
    """A real dev server with its Web UI on a free port, and the UI's URL."""
    ui_port = _free_port()
    env = await WorkflowEnvironment.start_local(
        dev_server_existing_path=str(temporal_cli_path()),
        data_converter=pydantic_data_converter,
        search_attributes=SEARCH_ATTRIBUTES,
        dev_server_log_level="warn",
        dev_server_startup_timeout=timedelta(seconds=60),
        ui=True,
        ui_port=ui_port,
    )
    try:
        yield env, f"http://127.0.0.1:{ui_port}"
    finally:
        await env.shutdown()


#: The saved queries the README lists for on-call (the cluster one is checked here).
SAVED_QUERIES = {
    "cluster": "TrainCluster = '{cluster}' OR WorkflowId STARTS_WITH 'train-{cluster}-'",
    "campaign": "TrainCampaign = 'campaign-{name}' OR WorkflowId STARTS_WITH 'ops-{name}-'",
    "operation": "TrainCampaign = '{op_id}'",
    "failed": "ExecutionStatus = 'Failed' OR TrainPhase IN ('halted', 'failed')",
    "waiting": (
        "ExecutionStatus = 'Running' AND "
        "TrainPhase IN ('waiting', 'waiting_for_room', 'paused', 'halted')"
    ),
}


# ------------------------------------------------------------------------------ the fleet
def _prepare_fleet(path: Path) -> float:
    """Every job running on c00 answers "wait for my next checkpoint", which comes
    ``CHECKPOINT_AHEAD`` fleet hours from now (and it runs far longer); c01 gets a bad build.
    Returns c00's fleet hour of the checkpoints' anchor."""
    fleet = SqliteFleet(path)
    try:
        with fleet.cluster("c00") as sim:
            now = sim.now
            for job in sim.jobs.values():
                if job.state != "running" or job.start is None:
                    continue
                ran = now - job.start
                job.work_hours = ran + 1000.0
                job.ckpt_hours = ran + CHECKPOINT_AHEAD  # last checkpoint: its start
                sim.state.job_behaviours[str(job.id)] = "checkpoint"
                sim.dirty_jobs.add(job.id)
        with fleet.cluster("c01") as sim:
            sim.inject_fault(BAD[0], BAD[1], 1.0, "operator")
    finally:
        fleet.close()
    return now


# ---------------------------------------------------------------------------- the server
async def _ids(client: Client, query: str, expect: set[str]) -> set[str]:
    """Workflow ids a visibility query finds, once it finds ``expect`` (visibility lags)."""
    found: set[str] = set()
    for _ in range(20):
        found = {w.id async for w in client.list_workflows(query)}
        if expect <= found:
            break
        await asyncio.sleep(1)
    return found


async def _running(client: Client, workflow_type: str | None = None) -> list[str]:
    query = "ExecutionStatus='Running'"
    if workflow_type:
        query += f" AND WorkflowType='{workflow_type}'"
    return [w.id async for w in client.list_workflows(query)]


async def _until(what: str, probe: Callable[[], Awaitable[Any]], wait: float = STATE_WAIT) -> Any:
    """``probe()``'s first answer that is not None, looking every second for ``wait`` s."""
    deadline = time.monotonic() + wait
    last: Any = None
    while time.monotonic() < deadline:
        try:
            found = await probe()
        except Exception as err:  # noqa: BLE001 - not started yet, or between tasks
            last = err
        else:
            if found is not None:
                return found
        await asyncio.sleep(1)
    raise AssertionError(f"never {what} (last: {last!r})")


async def _negotiated_domain(client: Client) -> tuple[str, str, int, str, float] | None:
    """A running domain of c00 with a host whose job answered "wait for my next checkpoint":
    (domain id, host, job, the host's note in the ``phase`` query, the eviction hour)."""
    for wid in await _running(client, "DomainMaintenance"):
        if not wid.startswith("train-c00-"):
            continue
        with contextlib.suppress(RPCError):
            phase: dict[str, Any] = await client.get_workflow_handle(wid).query("phase")
            for job, said in sorted(phase.get("waiting", {}).items()):
                m = NEGOTIATED.fullmatch(said)
                if not m:
                    continue
                for host, text in sorted(phase.get("hosts", {}).items()):
                    if text == f"draining: job {job} {said}":
                        return (
                            wid,
                            host,
                            int(job),
                            text.removeprefix("draining: "),
                            float(m.group(3)),
                        )
    return None


async def _halted(client: Client) -> TrainStatus | None:
    st = await train_status(client, "c01")
    return st if st.state == "halted" else None


# ----------------------------------------------------------------------------- the pages
async def _page_text(page: Page) -> str:
    """Everything the page shows, frames included (details are rendered in frames)."""
    parts = []
    for frame in page.frames:
        with contextlib.suppress(Exception):
            parts.append(await frame.inner_text("body", timeout=2_000))
    return "\n".join(parts)


async def _markdown_tables(page: Page) -> tuple[int, int]:
    """(frames, tables in them) of the frames the UI renders markdown in (the app's own page
    is not one)."""
    frames = [f for f in page.frames if f is not page.main_frame]
    count = 0
    for frame in frames:
        with contextlib.suppress(Exception):
            count += await frame.locator("table").count()
    return len(frames), count


async def _metadata_url(client: Client, ui: str, workflow_id: str) -> str:
    """The page of a workflow's User Metadata tab: its summary and current details."""
    run_id = (await client.get_workflow_handle(workflow_id).describe()).run_id
    return f"{ui}/namespaces/{client.namespace}/workflows/{workflow_id}/{run_id}/user-metadata"


def _no_run_together(name: str, text: str) -> None:
    for word in RUN_TOGETHER:
        assert word not in text, f"{name}: run-together columns ({word!r}):\n{text[:3000]}"


async def _open(
    page: Page,
    url: str,
    must_show: list[str],
    shot: Path,
    refresh: Callable[[], Awaitable[list[str]]] | None = None,
) -> str:
    """Open ``url`` until every pattern of ``must_show`` (and of ``refresh()``, asked again at
    every look: figures a query gives now) is on it; screenshot; its text. No page may draw a
    markdown table or run columns together.

    The UI is a single-page app that takes seconds to render on a loaded machine and fetches
    the current details by a query to the worker: look every second, reload every 15 s.
    """
    deadline = time.monotonic() + PAGE_WAIT
    text, missing = "", must_show
    await page.goto(url)
    loaded = time.monotonic()
    while missing:
        if time.monotonic() > deadline:
            await page.screenshot(path=str(shot), full_page=True)
            raise AssertionError(f"{url} never showed {missing}; it showed:\n{text[:4000]}")
        if time.monotonic() - loaded > 15:
            await page.reload()
            loaded = time.monotonic()
        await page.wait_for_timeout(1_000)
        text = await _page_text(page)
        patterns = must_show + (await refresh() if refresh is not None else [])
        missing = [p for p in patterns if not re.search(p, text)]
    await page.wait_for_timeout(500)  # let the last frame paint before the screenshot
    await page.screenshot(path=str(shot), full_page=True)
    _no_run_together(shot.stem, text)
    frames, tables = await _markdown_tables(page)
    assert frames and not tables, f"{shot.stem}: {tables} markdown table(s):\n{text[:3000]}"
    return text


def _line(text: str, start: str) -> str:
    """The rendered line that starts with ``start`` ('' if none)."""
    return next((ln for ln in text.splitlines() if ln.strip().startswith(start)), "")


# ------------------------------------------------------- the pages' text, without a browser
def test_a_halted_train_counts_its_hosts_in_maintenance_as_its_status_does() -> None:
    """The fleet's count from the train's last plan goes stale while it is halted (its domain
    came back quarantined): the page says what its domains hold now, as ``train status``."""
    spec = TrainSpec(cluster="c01", targets={BAD[0]: BAD[1]})
    st = TrainState(phase="halted", reason="2 hosts failed in a row (limit 2)")
    st.counts = CycleCounts(hosts_total=64, in_flight=2, fleet_hours=0.3)
    page = train_details(spec, st, {}, 6, SPEED)
    assert "now 0 in maintenance" in page
    assert status_of(spec, st, held=0).in_maintenance == 0
    assert "when the train last looked at the fleet (fleet hour 0.3)" in page


def test_a_held_campaign_keeps_the_error_and_the_query_as_written() -> None:
    """``<urlopen error ...>`` read as an HTML tag vanished from the page; the query, outside
    code, had its quotes curled."""
    query = 'ALERTS{alertname="ClusterQuarantinesHigh"} > 0'
    spec = CampaignSpec.model_validate(
        {
            "name": "k",
            "targets": {"os": "6.12.0-9"},
            "stages": [{"name": "canary", "clusters": ["c02"], "hosts": 1}],
            "gates": {"prometheus": {"url": "http://127.0.0.1:9", "query": query}},
        }
    )
    plan = [
        StagePlanModel(
            name="canary",
            clusters=["c02"],
            hosts_per_cluster={"c02": 1},
            partial=True,
            bake_hours=0.0,
            parallel=1,
            gates=spec.gates,
        )
    ]
    st = CampaignState(status=new_status(spec, plan), plan=plan)
    st.status.state, st.status.reason = "held", f"stage canary held by Prometheus: {query}"
    st.status.stage = "canary"
    st.status.stages[0].gate = "ok | prometheus: http://127.0.0.1:9: <urlopen error refused>"
    page = campaign_details(spec, st)
    assert f"held by Prometheus: `{query}`" in page
    assert r"\<urlopen error refused\>" in page


# ------------------------------------------------------------------------------ the test
async def test_the_ui_tells_each_story_on_its_page(ui_env, tmp_path, task_queue):
    """A negotiated drain, a waiting and an aborted operation, a halted train and a held
    campaign each tell on-call what they do, what they wait for and what to run next."""
    env, ui = ui_env
    client = env.client
    began = time.monotonic()
    path = make_fleet(tmp_path, SPEED, preset="multi")
    anchor = _prepare_fleet(path)
    shots = tmp_path / "screenshots"
    shots.mkdir()
    print(f"screenshots in {shots}")
    tag = uuid.uuid4().hex[:6]

    def op_spec(cluster: str) -> Any:
        return parse_spec_text(
            json.dumps(
                {
                    "kind": "cuda-upgrade",
                    "scope": {"cluster": cluster},
                    "targets": {"gpu_driver": "560.35.03", "cuda": "12.6"},
                    "budget": {"max_unavailable": "10%"},
                    "request_id": f"ui-{cluster}-{tag}",
                }
            )
        )

    waiting_op, aborted_op = op_spec("c00"), op_spec("c03")
    campaign = CampaignSpec.model_validate(
        {
            "name": f"held-{tag}",
            "targets": {"os": "6.12.0-9"},
            "stages": [{"name": "canary", "clusters": ["c02"], "hosts": 1}],
            # Nobody listens there: an answer the gate cannot read holds the stage.
            "gates": {
                "prometheus": {
                    "url": f"http://127.0.0.1:{_free_port()}",
                    "query": 'ALERTS{alertname="ClusterQuarantinesHigh"}',
                    "every": "2s",
                }
            },
        }
    )
    trains = ("c00", "c01")
    async with build_worker(client, path, task_queue):
        try:
            # rolling-serial takes hosts in name order, jobs or not: the first domain drains,
            # and each job on it is asked first (negotiate) and answers "wait for my next
            # checkpoint", CHECKPOINT_AHEAD hours off, inside max_wait.
            await _start_train(
                client,
                spec(
                    cluster="c00",
                    domain_size=4,
                    policy="rolling-serial",
                    drain={"max_wait": "12h", "negotiate": True},
                ),
                task_queue=task_queue,
            )
            await _start_train(
                client,
                spec(
                    cluster="c01",
                    domain_size=2,
                    targets={BAD[0]: BAD[1]},
                    halt_after_failures=2,
                    drain={"max_wait": "30m"},
                ),
                task_queue=task_queue,
            )
            started = await start_operation(
                client, waiting_op, clusters=["c00"], task_queue=task_queue
            )
            op_id = started.operation_id
            await start_campaign(client, campaign, task_queue=task_queue)
            await start_operation(client, aborted_op, clusters=["c03"], task_queue=task_queue)
            aborted_id = aborted_op.operation_id

            # The aborted operation: aborted once its cluster's part runs; it ends Failed.
            async def cluster_part_runs() -> bool | None:
                st = await operation_status(client, aborted_id)
                part = st.clusters.get("c03")
                return True if part is not None and part.state not in ("pending",) else None

            await _until("the c03 operation ran", cluster_part_runs)
            await control_operation(client, aborted_id, "abort", reason="test abort")
            aborted = await asyncio.wait_for(
                final_status(operation_handle(client, aborted_id)), 120
            )
            assert aborted.state == "aborted", aborted
            for wid in (aborted_id, f"{aborted_id}-c03"):
                desc = await client.get_workflow_handle(wid).describe()
                assert desc.status == WorkflowExecutionStatus.FAILED, (wid, desc.status)

            domain, host, job, note, evict_at = await _until(
                "a c00 job answered 'wait for my next checkpoint'",
                lambda: _negotiated_domain(client),
            )
            # The real eviction time: the job's next checkpoint (and a second, so it is whole).
            assert abs(evict_at - (anchor + CHECKPOINT_AHEAD)) < 0.01, (evict_at, anchor)
            print(f"setup took {time.monotonic() - began:.0f} s; {domain}: {host} {note}")

            async with async_playwright() as pw:
                browser = await pw.chromium.launch(
                    executable_path=CHROMIUM, args=["--no-sandbox", "--disable-gpu"]
                )
                page = await browser.new_page(viewport={"width": 1400, "height": 1600})

                # 1. The draining domain: the job's answer and its real eviction time.
                text = await _open(
                    page,
                    await _metadata_url(client, ui, domain),
                    [re.escape(f"{host} draining: {note}"), r"\d+ hosts? of c00 to"],
                    shots / "domain.png",
                )
                assert f"evict at fleet hour {evict_at:.2f}" in text
                assert f"job {job} to be evicted now" not in text, text[:3000]
                phase = await client.get_workflow_handle(domain).query("phase")
                assert phase["waiting"][str(job)] == note.removeprefix(f"job {job} "), phase
                assert phase["hosts"][host] == f"draining: {note}", phase

                # The running train of c00, and the operation waiting for it.
                await _open(
                    page,
                    await _metadata_url(client, ui, "train-c00"),
                    [r"Running.*cycle 1 of c00", r"\d+ of 64 hosts visited", r"ETA", r"Budget"],
                    shots / "train.png",
                )
                await _open(
                    page,
                    await _metadata_url(client, ui, f"{op_id}-c00"),
                    [r"\d+/\d+ waves done", r"(Waiting for: train-c00|Wave 1)"],
                    shots / "operation-c00.png",
                )
                await _open(
                    page,
                    await _metadata_url(client, ui, op_id),
                    [r"waves done over 1 cluster", r"cuda-upgrade to cuda 12\.6", r"c00"],
                    shots / "operation.png",
                )

                # 4. The aborted operation: its page says so, the list does not call it
                # completed.
                await _open(
                    page,
                    await _metadata_url(client, ui, aborted_id),
                    [r"FAILED", r"Aborted · cuda-upgrade", r"test abort"],
                    shots / "operation-aborted.png",
                )
                await page.goto(f"{ui}/namespaces/{client.namespace}/workflows")
                rows = page.locator("tr", has_text=aborted_id)
                await rows.first.wait_for(timeout=PAGE_WAIT * 1000)
                await page.wait_for_timeout(500)
                await page.screenshot(path=str(shots / "workflows.png"), full_page=True)
                listed = [await rows.nth(i).inner_text() for i in range(await rows.count())]
                assert listed, "the list does not show the aborted operation"
                for row in listed:  # the parent and its cluster's part
                    assert "failed" in row.lower() and "completed" not in row.lower(), listed

                # 2. The halted train: the failing host, the next command, the status figures.
                halted: TrainStatus = await _until("halted the c01 train", lambda: _halted(client))
                latest = halted.recent_failures[-1][0]

                async def figures() -> list[str]:
                    st = await train_status(client, "c01")
                    return [
                        rf"This cycle: {st.hosts_visited_this_cycle:,} of {st.hosts_total:,} "
                        rf"hosts visited \(\d+%[^)]*\), {st.quarantined:,} quarantined, "
                        rf"{st.in_repair:,} in repair when the train last looked at the fleet",
                        rf"now {st.in_maintenance:,} in maintenance",
                        rf"Since this train started: {plural(st.visits_total, 'host visit')}",
                    ]

                text = await _open(
                    page,
                    await _metadata_url(client, ui, "train-c01"),
                    [
                        r"Halted · cycle 1 of c01",
                        r"Latest failures:",
                        re.escape(f"trainctl fleet host {latest}"),
                        r"Next:.*trainctl train resume --cluster c01",
                    ],
                    shots / "train-halted.png",
                    refresh=figures,
                )
                assert latest in _line(text, "Latest failures:"), text[:3000]
                failed = {h for h, _ in halted.recent_failures}
                assert f"{plural(len(failed), 'host')} quarantined by it" in text, text[:3000]
                assert "No summary available" not in text

                # 3. The held campaign: "Held", the gate's line, the command that moves it on.
                async def held() -> Any:
                    st = await campaign_status(client, campaign.workflow_id)
                    return st if st.state == "held" else None

                status = await _until("held the campaign", held)
                gate = status.stages[0].gate
                assert "prometheus" in gate, gate
                text = await _open(
                    page,
                    await _metadata_url(client, ui, campaign.workflow_id),
                    [
                        r"Held",
                        r"Gate of canary:.*prometheus",
                        rf"Next:.*trainctl campaign abort --id {campaign.name}",
                    ],
                    shots / "campaign-held.png",
                )
                assert " ".join(gate.split()) in " ".join(_line(text, "Gate of canary:").split())
                assert "Connection refused" in _line(text, "Gate of canary:"), text[:3000]
                # The query as written (in code: no curled quotes), so what on-call copies runs.
                assert campaign.gates.prometheus is not None
                assert f"held by Prometheus: {campaign.gates.prometheus.query}" in text
                await browser.close()

            # The README's saved queries find what on-call looks for.
            expect = {"train-c00", domain, f"{op_id}-c00"}
            query = SAVED_QUERIES["cluster"].format(cluster="c00")
            assert expect <= await _ids(client, query, expect)
            expect = {op_id, f"{op_id}-c00"}
            query = SAVED_QUERIES["operation"].format(op_id=op_id)
            assert await _ids(client, query, expect) == expect
            for q in (
                SAVED_QUERIES["waiting"],
                SAVED_QUERIES["failed"],
                SAVED_QUERIES["campaign"].format(name="x"),
            ):
                await _ids(client, q, set())  # the server accepts it
        finally:
            left = await _wind_down(client, waiting_op.operation_id, campaign.workflow_id, trains)
        print(f"the test took {time.monotonic() - began:.0f} s")
    assert not left, f"still running after the test stopped everything: {left}"
    for name in (
        "domain",
        "train",
        "operation-c00",
        "operation",
        "operation-aborted",
        "workflows",
        "train-halted",
        "campaign-held",
    ):
        assert (shots / f"{name}.png").stat().st_size > 10_000


async def _wind_down(
    client: Client, op_id: str, campaign_id: str, trains: tuple[str, ...]
) -> list[str]:
    """End everything the test started the way an operator would, so trains hand their hosts
    back and the record stays clean: abort the waiting operation (before its train goes), abort
    the campaign (it stops the train it started), stop the trains; then the clusters' capacity
    arbiters, which hold nothing, are terminated; a draining domain that would wait hours for its
    job's checkpoint is cancelled (it hands its hosts back). Returns what was still running (then
    terminated): nothing may be."""

    async def step(what: str, aw: Awaitable[Any], wait: float = 120) -> None:
        t0 = time.monotonic()
        try:
            await asyncio.wait_for(aw, wait)
        except Exception as err:  # noqa: BLE001 - said, and the list of what runs decides
            print(f"wind down: {what}: {err!r}")
        print(f"wind down: {what} took {time.monotonic() - t0:.0f} s")

    await step("abort the waiting operation", control_operation(client, op_id, "abort", "done"))
    await step("abort the campaign", control_campaign(client, campaign_id, "abort", "test done"))
    for cluster in trains:
        await step(f"stop {cluster}", control_train(client, cluster, "stop", "test done"))
    # A stopping train finishes its domains first, and c00's drains wait hours for their jobs'
    # checkpoints: cancelled, a domain hands its hosts back, and the train stops.
    for wid in await _running(client, "DomainMaintenance"):
        with contextlib.suppress(RPCError):
            await client.get_workflow_handle(wid).cancel()
    # The campaign's train of c02 is stopped by the abort.
    ends: list[Awaitable[Any]] = [
        operation_handle(client, op_id).result(),
        client.get_workflow_handle(campaign_id).result(),
        *(train_handle(client, c).result() for c in (*trains, "c02")),
    ]
    for what, end in zip(("operation", "campaign", *trains, "c02"), ends, strict=True):
        await step(f"{what} ended", end, 60)
    left = []
    for wid in await _running(client):  # visibility lags: each one's own status decides
        handle = client.get_workflow_handle(wid)
        with contextlib.suppress(RPCError):
            if (await handle.describe()).status != WorkflowExecutionStatus.RUNNING:
                continue
            if not wid.startswith("capacity-"):
                left.append(wid)  # did not end by itself: terminated, and the test fails
            await handle.terminate("test done")
    print(f"wind down: still running: {left}")
    return left


async def test_a_rolled_back_campaign_page_says_what_it_put_back_and_what_next(
    ui_env, tmp_path, task_queue
):
    """A kernel breaking every host of its canary: the campaign rolls back, and its page in a
    real Chromium says so, names how many hosts of which cluster went back to their previous
    kernel, that the kernel is marked bad, and the commands that move on from there, the same
    figures its status query gives; no stage still reads as rolling or baking. Beside it, an
    operation whose budget repairs fill: its page names the hosts, their holder, the command
    that says why, and its wait in durations."""
    env, ui = ui_env
    client = env.client
    path = make_fleet(tmp_path, 36_000.0, preset="multi")
    fleet = SqliteFleet(path)
    try:
        with fleet.cluster("c00") as sim:
            sim.inject_fault("os", "6.12.0-bad", 1.0, "test")
        victims = _outage(fleet, "c03", 3)
    finally:
        fleet.close()
    spec = CampaignSpec.model_validate(
        {
            "name": f"kernel-bad-{uuid.uuid4().hex[:6]}",
            "targets": {"os": "6.12.0-bad"},
            "stages": [
                {"name": "canary", "clusters": ["c00"], "hosts": 4, "bake": "2h"},
                {"name": "rest", "clusters": "*"},
            ],
            "gates": {"max_failures": "5%"},
        }
    )
    async with build_worker(client, path, task_queue):
        done = await start_campaign(client, spec, task_queue=task_queue, wait=True)
        status = done.status
        assert status is not None and status.state == "rolled_back", status
        assert status.hosts_rolled_back > 0, status
        back = status.rolled_back_per_cluster
        assert set(back) == {"c00"} and sum(back.values()) == status.hosts_rolled_back, back
        async with async_playwright() as pw:
            browser = await pw.chromium.launch(
                executable_path=CHROMIUM, args=["--no-sandbox", "--disable-gpu"]
            )
            page = await browser.new_page(viewport={"width": 1400, "height": 1600})
            hosts = plural(status.hosts_rolled_back, "host")
            text = await _open(
                page,
                await _metadata_url(client, ui, spec.workflow_id),
                [
                    r"Rolled back",
                    re.escape(f"Rolled back: {hosts} (c00 {back['c00']})"),
                    r"trainctl versions list",
                    r"trainctl versions clear os=6\.12\.0-bad",
                ],
                tmp_path / "campaign-rolled-back.png",
            )
            room = await _waiting_for_room_page(client, ui, page, victims, task_queue, tmp_path)
            await browser.close()
    assert not re.search(r"\brolling\b|bake [^\n]* left", text), text[:3000]
    assert "No summary available" not in text
    assert not re.search(r"at most [\d.]+ h more", room), room[:3000]


def _outage(fleet: SqliteFleet, cluster: str, n: int) -> list[str]:
    """Send ``n`` serving hosts of ``cluster`` to repair for longer than the test runs."""
    with fleet.cluster(cluster) as sim:
        victims = [m for m, h in sorted(sim.hosts.items()) if h.state == "in_service"][-n:]
        for name in victims:
            sim.hand_to_repair(name, "test", "outage for the test")
            sim.hosts[name].repair_until = sim.now + 100_000.0
            sim.dirty_hosts.add(name)
    return victims


async def _waiting_for_room_page(
    client: Client, ui: str, page: Page, victims: list[str], task_queue: str, tmp_path: Path
) -> str:
    """An operation whose budget repairs fill: its cluster's page says it waits for room,
    which hosts hold the budget and who (in repair), the command that says why, and how long
    it waits in durations; the operation is aborted afterwards."""
    op = parse_spec_text(
        json.dumps(
            {
                "kind": "reboot",
                "scope": {"cluster": "c03", "racks": ["c03-z00-r000"]},
                "budget": {"max_unavailable": len(victims)},
                "max_wait_for_room": "200d",
                "request_id": f"room-{uuid.uuid4().hex[:6]}",
            }
        )
    )
    await start_operation(client, op, clusters=["c03"], task_queue=task_queue)

    async def waiting() -> bool | None:
        part = (await operation_status(client, op.operation_id)).clusters.get("c03")
        return True if part is not None and part.state == "waiting_for_room" else None

    try:
        await _until("the c03 operation waits for room", waiting)
        return await _open(
            page,
            await _metadata_url(client, ui, f"{op.operation_id}-c03"),
            [
                r"Waiting for room · reboot",
                # failures at this fleet speed may have put more hosts out beside the victims
                r"budget\.max_unavailable: \d+ hosts out of service in c03",
                r"in repair: c03-",
                *(re.escape(f"{v} (outage for the test)") for v in victims),
                r"See why: trainctl fleet host c03-",
                r"waits for room, at most \d+ d( \d+ h)? more \(max_wait_for_room 200 d\)",
            ],
            tmp_path / "operation-waiting-for-room.png",
        )
    finally:
        await control_operation(client, op.operation_id, "abort", reason="test done")
        await asyncio.wait_for(final_status(operation_handle(client, op.operation_id)), 60)
