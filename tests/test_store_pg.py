"""The fleet store on PostgreSQL: one schema with SQLite, the store chosen by URL (never with a
password), a newer schema refused (on both stores), a lost connection temporary, and two workers
racing on one cluster never exceeding its budget nor giving one host two owners. A real
PostgreSQL (``pg_helpers``), no mock."""

from __future__ import annotations

import contextlib
import json
import multiprocessing
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from sqlalchemy import text
from temporalio.service import RPCError

from orchestrator.app.cli import main
from orchestrator.audit.record_checks import audit
from orchestrator.contracts.errors import FleetSchemaMismatch
from orchestrator.fleet import SqliteFleet, open_backend
from orchestrator.fleet.ledger_files import peek_meta
from orchestrator.fleet.presets import get_preset
from orchestrator.fleet.store_db import StoreUnavailable
from orchestrator.fleet.store_schema import SCHEMA_VERSION
from orchestrator.fleet.store_url import STORE_ENV
from orchestrator.train.status import visit_figures
from tests.pg_helpers import PgServer

#: A real-time fleet: next to nothing happens in it over the seconds a test takes, so what the
#: tests compare is what their own scripts did.
STILL = 1.0


def run(*args: str) -> Any:
    return CliRunner().invoke(main, list(args))


def _script(fleet: SqliteFleet) -> dict[str, Any]:
    """The same ledger changes on any store, all at the fleet's first instant; what the store
    holds afterwards."""
    c, at = fleet.cluster_names()[0], fleet.anchor_wall
    with fleet.cluster(c, at) as b:
        names = list(b.host_names())[:4]
        taken = [b.cordon(n, "train-a", "t", limit=3, maintenance=3) for n in names]
    with fleet.cluster(c, at) as b:
        b.release(names[0], "t")
    held = sorted(n for n in names if fleet.peek(c, at).host(n).owner == "train-a")
    with fleet.cluster(c, at) as b:
        for n in held:
            b.release(n, "t")
        b.close_owner("train-a", "t", "stopped")
    fleet.mark_bad("os", "6.12.0-bad", "boot loop", "tester")
    fleet.clear_bad("os", "6.12.0-bad", "fixed", "tester")
    return {
        "taken": taken,
        "records": [(e.actor, e.kind, e.host, dict(e.detail)) for _, e, _ in fleet.records()],
        "bad": [(b.component, b.version, b.active) for b in fleet.bad_versions(True)],
        "clock": fleet.fleet_time(at, c),
        "held": held,
        "domains": fleet.failure_domains(c),
    }


def test_ledger_gives_the_same_record_on_sqlite_and_postgresql(tmp_path: Path, pg_store: str):
    """One script of cordons, a release and a bad version leaves the same record, the same
    holds and the same clock on both stores, and the audit passes on each."""
    out = []
    for where in (tmp_path / "fleet.db", pg_store):
        fleet = SqliteFleet.create(where, get_preset("small"), 3, STILL)
        try:
            out.append(_script(fleet))
            assert audit(fleet).ok
        finally:
            fleet.close()
    assert out[0]["taken"] == [True, True, True, False]  # the budget of 3 held
    assert out[0] == out[1]


def test_fleet_init_store_writes_the_url_and_every_command_finds_it(
    tmp_home: Path, pg_store: str, monkeypatch: pytest.MonkeyPatch
):
    """``fleet init --store URL`` builds the fleet in PostgreSQL and writes the URL to
    TRAINCTL_HOME/store; ``fleet status --json`` then reads it and names it as ``store``;
    TRAINCTL_STORE wins over the file; no SQLite file is made."""
    r = run("fleet", "init", "--preset", "small", "--speed", "1", "--store", pg_store, "--json")
    assert r.exit_code == 0, r.output
    shown = pg_store.replace("postgres@", "")  # output never carries userinfo (cli.common.emit)
    assert json.loads(r.stdout)["store"] == shown
    assert (tmp_home / "store").read_text().strip() == pg_store
    assert not (tmp_home / "fleet.db").exists()
    r = run("fleet", "status", "--json")
    assert r.exit_code == 0, r.output
    status = json.loads(r.stdout)
    assert status["store"] == shown and status["hosts_total"] == 128
    r = run("fleet", "init", "--preset", "small", "--store", pg_store, "--json")
    assert r.exit_code == 2 and json.loads(r.stdout)["field"] == "force", r.output
    monkeypatch.setenv(STORE_ENV, str(tmp_home / "other.db"))
    r = run("fleet", "status", "--json")
    assert r.exit_code == 1 and "other.db" in r.output, r.output  # no fleet there


@pytest.mark.parametrize(
    "secret_url",
    [
        "postgresql://ops:hunter2@db:5432/fleet",
        "postgresql://ops:@db/fleet",
        "postgresql://ops@db/fleet?password=hunter2",
    ],
)
def test_store_url_with_a_password_is_refused_and_never_echoed(
    tmp_home: Path, monkeypatch: pytest.MonkeyPatch, secret_url: str
):
    """A URL carrying a password is refused with exit 2 naming ``store``, in one line, the
    password nowhere in the output: by ``fleet init --store`` and from TRAINCTL_STORE."""
    for args in (
        ("fleet", "init", "--preset", "small", "--store", secret_url),
        ("fleet", "status"),
    ):
        for as_json in (False, True):
            if args[1] == "status":
                monkeypatch.setenv(STORE_ENV, secret_url)
            r = run(*args, *(["--json"] if as_json else []))
            assert r.exit_code == 2, r.output
            assert "hunter2" not in r.output and "Traceback" not in r.output
            if as_json:
                err = json.loads(r.stdout)
                assert err["field"] == "store" and "PGPASSWORD" in err["error"], err
            else:
                assert len(r.output.strip().splitlines()) == 1 and "store" in r.output
    assert not (tmp_home / "store").exists()


def test_a_store_newer_than_this_trainctl_is_refused(tmp_home: Path, store_where: Path | str):
    """A store whose schema is newer than the code is refused and left as it is, on SQLite and
    on PostgreSQL: by the backend, and by a worker before it polls (a rolling upgrade never
    writes an old shape into a new schema)."""
    SqliteFleet.create(store_where, get_preset("small"), 1, STILL).close()
    fleet = SqliteFleet(store_where)
    with fleet.db.tx() as conn:
        conn.execute(
            text("UPDATE meta SET value=:v WHERE key='schema_version'"),
            {"v": str(SCHEMA_VERSION + 1)},
        )
    fleet.close()
    with pytest.raises(FleetSchemaMismatch, match="newer than this trainctl"):
        SqliteFleet(store_where)
    with pytest.raises(FleetSchemaMismatch):
        open_backend(store_where)
    worker = CliRunner(env={STORE_ENV: str(store_where)}).invoke(
        main, ["worker", "--address", "127.0.0.1:1", "--metrics-port", "0", "--json"]
    )
    assert worker.exit_code == 2 and "newer than this trainctl" in worker.output, worker.output
    assert peek_meta(store_where, "schema_version") == str(SCHEMA_VERSION + 1)  # untouched


def test_a_lost_connection_is_temporary_and_writes_nothing(pg_server: PgServer, pg_store: str):
    """PostgreSQL restarting under an open fleet: the transaction in the way fails with a
    temporary error (an activity retries it), nothing of it is written, the next one works."""
    fleet = SqliteFleet.create(pg_store, get_preset("small"), 1, STILL)
    try:
        before = sum(1 for _ in fleet.records())
        c, at = fleet.cluster_names()[0], fleet.anchor_wall  # no fleet time passes
        pg_server.restart()
        with pytest.raises(StoreUnavailable), fleet.cluster(c, at) as b:
            b.cordon(b.host_names()[0], "train-a", "t", limit=10)
        assert sum(1 for _ in fleet.records()) == before
        with fleet.cluster(c, at) as b:
            assert b.cordon(b.host_names()[0], "train-a", "t", limit=10)
        assert sum(1 for _ in fleet.records()) == before + 1
    finally:
        fleet.close()


# ---------------------------------------------------------------------------- races
BUDGET = 3
ROUNDS = 200


def _racer(url: str, me: str, start: Any, out: Any) -> None:
    """One worker: ROUNDS times, cordon every host it can under the budget, then hand back."""
    fleet = open_backend(url)
    seen_over = 0
    start.wait()
    for _ in range(ROUNDS):
        with fleet.cluster("c00") as b:
            for name in list(b.host_names())[:8]:
                b.cordon(name, me, me, limit=BUDGET, maintenance=BUDGET)
            seen_over += b.out_of_service_count() > BUDGET
        with fleet.cluster("c00") as b:
            for name in list(b.host_names())[:8]:
                if b.host(name).owner == me:
                    b.release(name, me)
    fleet.close()
    out.put((me, seen_over))


def test_two_workers_cordoning_at_once_keep_the_budget_and_one_owner(pg_store: str):
    """Two processes, each its own connection as on two machines, cordon on one cluster at the
    same moment 200 times: never more than the budget out, never a host taken by both."""
    fleet = SqliteFleet.create(pg_store, get_preset("small"), 1, STILL)
    fleet.close()
    ctx = multiprocessing.get_context("spawn")
    start, out = ctx.Event(), ctx.Queue()
    procs = [ctx.Process(target=_racer, args=(pg_store, f"train-w{i}", start, out)) for i in (1, 2)]
    for p in procs:
        p.start()
    start.set()
    results = dict(out.get(timeout=600) for _ in procs)
    for p in procs:
        p.join(60)
        assert p.exitcode == 0
    assert results == {"train-w1": 0, "train-w2": 0}
    fleet = SqliteFleet(pg_store)
    try:
        held: dict[str, str] = {}
        most = 0
        cordons = 0
        for _, ev, _ in fleet.records(cluster="c00"):
            if ev.kind != "host_state" or ev.host is None:
                continue
            if ev.detail["after"] == "cordoned":
                assert ev.host not in held, f"{ev.host} taken by {held.get(ev.host)} and again"
                held[ev.host] = str(ev.detail["owner"])
                cordons += 1
            elif ev.detail["after"] == "in_service":
                held.pop(ev.host, None)
            most = max(most, len(held))
        assert most == BUDGET and cordons >= ROUNDS
        assert audit(fleet).ok
    finally:
        fleet.close()


# --------------------------------------------------------------------------- migrating
def _audit_json() -> dict[str, Any]:
    r = run("audit", "--json")
    assert r.exit_code == 0, r.output
    out: dict[str, Any] = json.loads(r.stdout)
    return out


def test_fleet_migrate_copies_a_sqlite_fleet_and_its_record_to_postgresql(
    tmp_home: Path, tmp_path: Path, pg_store: str
):
    """``fleet migrate --to URL`` copies a SQLite fleet, record included, into an empty
    PostgreSQL store the home then uses: the audit agrees before and after, the record is the
    same entry for entry, new entries follow the copied ones, and ``--to FILE`` copies it back."""
    r = run("fleet", "init", "--preset", "small", "--speed", "1", "--seed", "3")
    assert r.exit_code == 0, r.output
    fleet = SqliteFleet(tmp_home / "fleet.db")
    _script(fleet)
    before = list(fleet.records())
    fleet.close()
    audited = _audit_json()
    assert audited["ok"] and audited["events_checked"] == len(before)

    r = run("fleet", "migrate", "--to", pg_store, "--json")
    assert r.exit_code == 0, r.output
    assert json.loads(r.stdout)["events"] == len(before)
    assert (tmp_home / "store").read_text().strip() == pg_store
    assert _audit_json() == audited
    fleet = open_backend(pg_store)
    try:
        assert list(fleet.records()) == before
        with fleet.cluster("c00") as b:
            b.record("tester", "note", None)
        assert [seq for seq, _, _ in fleet.records(since=before[-1][0])] == [before[-1][0] + 1]
    finally:
        fleet.close()

    r = run("fleet", "migrate", "--to", pg_store, "--json")
    assert r.exit_code == 2 and json.loads(r.stdout)["field"] == "to", r.output
    back = tmp_path / "back.db"
    r = run("fleet", "migrate", "--to", str(back), "--json")
    assert r.exit_code == 0, r.output
    fleet = SqliteFleet(back)
    try:
        assert list(fleet.records())[: len(before)] == before
        assert audit(fleet).ok
    finally:
        fleet.close()


def test_backup_and_restore_as_the_readme_shows(
    tmp_home: Path,
    tmp_path: Path,
    pg_server: PgServer,
    pg_store: str,
    monkeypatch: pytest.MonkeyPatch,
):
    """The README's backup and restore of a PostgreSQL record: ``pg_dump -Fc`` then
    ``pg_restore`` into an empty database, and ``fleet migrate --to FILE`` then, from that
    file, ``fleet migrate --to URL``: each restored store has the same record entry for entry,
    the audit agrees, and new entries follow the restored ones."""
    import subprocess

    from tests.pg_helpers import pg_bin

    r = run("fleet", "init", "--preset", "small", "--speed", "1", "--store", pg_store)
    assert r.exit_code == 0, r.output
    fleet = SqliteFleet(pg_store)
    try:
        _script(fleet)
        before = list(fleet.records())
    finally:
        fleet.close()
    audited = _audit_json()
    dump = tmp_path / "trainctl.dump"
    subprocess.run([pg_bin("pg_dump"), "-Fc", "-f", str(dump), pg_store], check=True)
    from_dump = pg_server.new_database()
    subprocess.run([pg_bin("pg_restore"), "--no-owner", "-d", from_dump, str(dump)], check=True)
    backup = tmp_path / "backup.db"
    r = run("fleet", "migrate", "--to", str(backup), "--json")
    assert r.exit_code == 0, r.output
    from_file = pg_server.new_database()
    with monkeypatch.context() as env:  # restore: the backup file is the source
        env.setenv(STORE_ENV, str(backup))
        r = run("fleet", "migrate", "--to", from_file, "--json")
    assert r.exit_code == 0, r.output
    for restored in (from_dump, from_file):
        fleet = open_backend(restored)
        try:
            assert list(fleet.records()) == before
            with fleet.cluster("c00") as b:
                b.record("tester", "note", None)
            after = list(fleet.records(since=before[-1][0]))  # the note, and what c00 did
            last = before[-1][0]
            assert [s for s, _, _ in after] == list(range(last + 1, last + 1 + len(after)))
            assert "note" in [e.kind for _, e, _ in after]
        finally:
            fleet.close()
        with monkeypatch.context() as env:
            env.setenv(STORE_ENV, restored)
            again = _audit_json()
        assert again["ok"] and again["events_checked"] == audited["events_checked"] + len(after)


# --------------------------------------------------------------------- a train on it
async def test_a_train_on_a_postgresql_store_passes_the_audit(
    dev_env: Any, tmp_home: Path, pg_store: str, task_queue: str, monkeypatch: pytest.MonkeyPatch
):
    """A worker on a PostgreSQL store (the real dev server, no mock) runs a train through a
    whole cycle of the small fleet; `trainctl audit` on the store then passes."""
    import asyncio
    import uuid

    from orchestrator.app.worker import build_worker
    from orchestrator.contracts.arbiter_types import arbiter_workflow_id
    from orchestrator.contracts.train_types import TrainInput
    from tests.train_helpers import spec
    from workflows.cluster_train import ClusterTrain

    r = run("fleet", "init", "--preset", "small", "--speed", "36000", "--store", pg_store)
    assert r.exit_code == 0, r.output
    monkeypatch.setenv(STORE_ENV, pg_store)
    handle = None
    async with build_worker(dev_env.client, pg_store, task_queue):
        try:
            handle = await dev_env.client.start_workflow(
                ClusterTrain.run,
                TrainInput(spec=spec(stop_after_cycles=1)),
                id=f"train-c00-{uuid.uuid4().hex[:8]}",
                task_queue=task_queue,
            )
            final = await asyncio.wait_for(handle.result(), 240)
        finally:
            for wid in ([handle.id] if handle else []) + [arbiter_workflow_id("c00")]:
                with contextlib.suppress(RPCError):  # already ended
                    await dev_env.client.get_workflow_handle(wid).terminate("test cleanup")
    assert final.state == "stopped" and final.cycles_completed == 1
    assert sum(visit_figures(final)) == 128
    audited = _audit_json()
    assert audited["ok"] and audited["events_checked"] > 128, audited


def test_compose_workers_share_a_record_on_the_healthy_postgresql():
    """docker-compose gives the workers a store on its PostgreSQL, without a password in the
    URL, and starts them only once that PostgreSQL is healthy."""
    import yaml

    from orchestrator.fleet.store_url import check_store_url

    compose = yaml.safe_load(
        (Path(__file__).resolve().parent.parent / "docker-compose.yml").read_text()
    )
    services = compose["services"]
    worker = services["worker"]
    assert worker["depends_on"]["postgresql"]["condition"] == "service_healthy"
    assert "pg_isready" in " ".join(services["postgresql"]["healthcheck"]["test"])
    url = worker["environment"]["TRAINCTL_STORE"]
    assert check_store_url(url) == url and "@postgresql:" in url


def test_the_audit_names_a_host_taken_while_another_owner_holds_it():
    """A record where a second owner cordons a host the first still holds (a lost update)
    fails the audit with ``two_owners``; a hand-back before the second cordon does not."""
    from orchestrator.audit.record_checks import audit_events
    from orchestrator.contracts.backend import RecordEntry

    def cordon(seq: int, owner: str, before: str = "in_service") -> tuple[int, Any, str]:
        detail = {"before": before, "after": "cordoned", "reason": f"maintenance by {owner}"}
        detail |= {"owner": owner, "limit": 10}
        return seq, RecordEntry(1.0, owner, "host_state", "c00-z00-r000-h00", detail), "c00"

    back = {"before": "cordoned", "after": "in_service", "reason": "released untouched"}
    released = (2, RecordEntry(1.0, "a", "host_state", "c00-z00-r000-h00", back), "c00")
    lost = audit_events([cordon(1, "train-a"), cordon(2, "train-b", "cordoned")])
    assert [v.kind for v in lost.violations] == ["two_owners"]
    assert "train-a" in lost.violations[0].detail
    assert audit_events([cordon(1, "train-a"), released, cordon(3, "train-b")]).ok


def test_a_slurm_fleet_keeps_its_record_on_postgresql(tmp_home: Path, pg_store: str):
    """``fleet init --backend slurm --store URL`` records a real (lab) Slurm cluster in
    PostgreSQL: status names the store, a cordon and release through Slurm land in the record
    there, and the audit passes on it."""
    from orchestrator.fleet.slurm import SlurmFleet
    from orchestrator.lab.slurm import lab_down
    from tests.test_slurm_two_clusters import lab_up

    try:
        lab = lab_up(tmp_home, "pg")
        r = run(
            "fleet", "init", "--backend", "slurm", "--slurm-conf", lab.slurm_conf,
            "--backend-config", lab.backend_config, "--store", pg_store, "--json",
        )  # fmt: skip
        assert r.exit_code == 0, r.output
        assert json.loads(r.stdout)["store"] == pg_store.replace("postgres@", "")
        assert not (tmp_home / "fleet.db").exists()
        r = run("fleet", "status", "--json")
        assert r.exit_code == 0, r.output
        assert json.loads(r.stdout)["store"] == pg_store.replace("postgres@", "")
        fleet = open_backend(pg_store)
        assert isinstance(fleet, SlurmFleet)
        try:
            c = fleet.cluster_names()[0]
            with fleet.cluster(c) as b:
                node = b.host_names()[0]
                assert b.cordon(node, "train-pg", "tester", limit=4)
            with fleet.cluster(c) as b:
                b.release(node, "tester")
                b.close_owner("train-pg", "tester")
            kinds = [(e.kind, e.host) for _, e, _ in fleet.records()]
            assert kinds.count(("host_state", node)) >= 2
            assert audit(fleet).ok
        finally:
            fleet.close()
    finally:
        lab_down(tmp_home, "pg")


#: The hand-written SQLite tables every fleet file had before the SQLAlchemy schema (schema 5).
HAND_WRITTEN_V5 = """
CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE clusters (name TEXT PRIMARY KEY, state TEXT NOT NULL);
CREATE TABLE hosts (
    name TEXT PRIMARY KEY, cluster TEXT NOT NULL, zone TEXT NOT NULL, rack TEXT NOT NULL,
    state TEXT NOT NULL, versions TEXT NOT NULL, job_id INTEGER, reason TEXT NOT NULL,
    owner TEXT NOT NULL, repair_until REAL, defect TEXT, last_visit REAL,
    verified INTEGER NOT NULL, updates INTEGER NOT NULL, last_boot REAL);
CREATE INDEX hosts_cluster ON hosts(cluster);
CREATE TABLE jobs (
    cluster TEXT NOT NULL, id INTEGER NOT NULL, size INTEGER NOT NULL, work REAL NOT NULL,
    ckpt REAL NOT NULL, submitted REAL NOT NULL, hosts TEXT NOT NULL, start REAL,
    driver TEXT NOT NULL, cuda TEXT NOT NULL, state TEXT NOT NULL, interruptions INTEGER NOT NULL,
    PRIMARY KEY (cluster, id));
CREATE INDEX jobs_live ON jobs(cluster, state);
CREATE TABLE switches (
    name TEXT PRIMARY KEY, tier TEXT NOT NULL, cluster TEXT, firmware TEXT NOT NULL);
CREATE TABLE events (
    seq INTEGER PRIMARY KEY AUTOINCREMENT, t REAL NOT NULL, cluster TEXT NOT NULL,
    actor TEXT NOT NULL, kind TEXT NOT NULL, host TEXT, detail TEXT NOT NULL);
CREATE TABLE clocks (cluster TEXT PRIMARY KEY, now REAL NOT NULL);
CREATE TABLE clock_parties (
    cluster TEXT NOT NULL, party TEXT NOT NULL, workflow_id TEXT NOT NULL, owner TEXT NOT NULL,
    parent TEXT, rank INTEGER NOT NULL, epoch TEXT NOT NULL, waiting INTEGER NOT NULL,
    target REAL, seen REAL NOT NULL, PRIMARY KEY (cluster, party));
CREATE TABLE workers (
    id TEXT PRIMARY KEY, host TEXT NOT NULL, pid INTEGER NOT NULL, fleet TEXT NOT NULL,
    started REAL NOT NULL, last_seen REAL NOT NULL);
"""


@pytest.mark.parametrize("version", [5, 4])
def test_a_fleet_file_with_the_hand_written_tables_works_as_one_made_now(
    tmp_path: Path, version: int
):
    """A fleet file whose tables were made by the hand-written DDL of before (same rows) gives
    the same record under the same script as a file made by the SQLAlchemy schema; one of
    schema 4 (no workers table) is first migrated in place, the same file, to the current."""
    import sqlite3

    new = tmp_path / "new.db"
    SqliteFleet.create(new, get_preset("small"), 3, STILL).close()
    old = tmp_path / "old.db"
    conn = sqlite3.connect(old, isolation_level=None)
    ddl = HAND_WRITTEN_V5
    if version == 4:
        ddl = ddl[: ddl.index("CREATE TABLE workers")]
    conn.executescript(ddl)
    conn.execute("ATTACH DATABASE ? AS src", (str(new),))
    for table in ("meta", "clusters", "hosts", "jobs", "switches", "events"):
        conn.execute(f"INSERT INTO {table} SELECT * FROM src.{table}")
    conn.execute("INSERT INTO clocks SELECT cluster, 0.0 FROM src.cluster_locks")
    conn.execute("DETACH DATABASE src")
    conn.execute("UPDATE meta SET value=? WHERE key='schema_version'", (str(version),))
    conn.close()
    inode = old.stat().st_ino
    out = []
    for where in (new, old):
        fleet = SqliteFleet(where)
        try:
            out.append(_script(fleet))
            assert audit(fleet).ok
        finally:
            fleet.close()
    assert out[0] == out[1]
    conn = sqlite3.connect(old)
    try:
        (stored,) = conn.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone()
        tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master")}
    finally:
        conn.close()
    assert stored == str(SCHEMA_VERSION) and "workers" in tables and "cluster_locks" in tables
    assert not {"clocks", "clock_parties"} & tables
    assert old.stat().st_ino == inode  # in place: the same file, not a copy
