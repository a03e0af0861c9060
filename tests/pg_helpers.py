"""A real PostgreSQL for the tests: Debian's server binaries, a cluster of our own in a temporary
directory, on a loopback port, as the ``postgres`` user (the server refuses to run as root).

Connections over TCP need a password (scram-sha-256), given only through ``PGPASSWORD`` as a
user of trainctl gives it: the store URLs the tests hand to trainctl carry none. A missing
PostgreSQL fails the test that needs it (no skip): ``scripts/test`` installs it.
"""

from __future__ import annotations

import glob
import os
import shutil
import socket
import subprocess
import tempfile
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path

#: The superuser's password: in ``PGPASSWORD`` while the tests run, never in a URL.
PASSWORD = "pg-" + uuid.uuid4().hex[:12]
USER = "postgres"


def pg_bin(name: str) -> str:
    """A server binary of Debian's ``postgresql`` (under /usr/lib/postgresql/N/bin)."""
    found = sorted(glob.glob(f"/usr/lib/postgresql/*/bin/{name}"))
    if not found:
        raise RuntimeError(
            f"PostgreSQL's {name} not found under /usr/lib/postgresql/*/bin: install Debian's "
            "postgresql (scripts/test does)"
        )
    return found[-1]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _as_postgres(args: list[str], **kw: object) -> subprocess.CompletedProcess[str]:
    prefix = ["runuser", "-u", USER, "--"] if os.geteuid() == 0 else []
    return subprocess.run(  # type: ignore[call-overload, no-any-return]
        [*prefix, *args], check=True, capture_output=True, text=True, **kw
    )


@dataclass
class PgServer:
    """One running PostgreSQL cluster; ``url(db)`` names a database on it (no password)."""

    root: Path
    port: int
    dbs: list[str] = field(default_factory=list)

    @property
    def data(self) -> Path:
        return self.root / "data"

    def url(self, db: str) -> str:
        return f"postgresql://{USER}@127.0.0.1:{self.port}/{db}"

    def new_database(self, prefix: str = "fleet") -> str:
        """A fresh empty database; its URL."""
        name = f"{prefix}_{uuid.uuid4().hex[:10]}"
        self.psql(f'CREATE DATABASE "{name}"')
        self.dbs.append(name)
        return self.url(name)

    def psql(self, sql: str, db: str = "postgres") -> str:
        out = subprocess.run(
            [pg_bin("psql"), "-h", "127.0.0.1", "-p", str(self.port), "-U", USER, "-d", db]
            + ["-v", "ON_ERROR_STOP=1", "-At", "-c", sql],
            check=True,
            capture_output=True,
            text=True,
            env={**os.environ, "PGPASSWORD": PASSWORD},
        )
        return out.stdout

    def start(self) -> None:
        _as_postgres(
            [pg_bin("pg_ctl"), "-D", str(self.data), "-l", str(self.root / "log"), "-w"]
            + ["-t", "60", "-o", f"-p {self.port} -k {self.root} -c listen_addresses=127.0.0.1"]
            + ["start"]
        )

    def stop(self, mode: str = "fast") -> None:
        _as_postgres([pg_bin("pg_ctl"), "-D", str(self.data), "-m", mode, "-w", "stop"])

    def restart(self) -> None:
        """Stop (dropping every connection) and start again on the same port."""
        self.stop("immediate")
        self.start()


def start_server() -> PgServer:
    """A new cluster in a temporary directory, started; the caller stops it."""
    root = Path(tempfile.mkdtemp(prefix="trainctl-pg-"))
    shutil.chown(root, USER, USER)
    os.chmod(root, 0o700)
    pwfile = root / "pw"
    pwfile.write_text(PASSWORD + "\n")
    shutil.chown(pwfile, USER, USER)
    _as_postgres(
        [pg_bin("initdb"), "-D", str(root / "data"), "-U", USER, "--pwfile", str(pwfile)]
        + ["--auth-local=trust", "--auth-host=scram-sha-256", "-E", "UTF8", "--no-sync"]
    )
    pwfile.unlink()
    conf = root / "data" / "postgresql.conf"
    with conf.open("a") as f:  # a test cluster: speed over durability
        f.write("fsync = off\nfull_page_writes = off\n")  # no machine crash in a test
        f.write("max_connections = 200\nshared_buffers = 64MB\n")
    server = PgServer(root, _free_port())
    server.start()
    deadline = time.monotonic() + 30
    while True:
        try:
            server.psql("SELECT 1")
            return server
        except subprocess.CalledProcessError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.2)


def remove_server(server: PgServer) -> None:
    try:
        server.stop("immediate")
    finally:
        shutil.rmtree(server.root, ignore_errors=True)
