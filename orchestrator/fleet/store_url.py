"""Which store a fleet lives in: the SQLite file under ``TRAINCTL_HOME`` (the embedded default)
or a PostgreSQL database that workers on many machines share.

Every command and every worker find the store the same way (``resolve_store``):
``TRAINCTL_STORE``, else the URL that ``trainctl fleet init --store`` wrote to
``TRAINCTL_HOME/store``, else ``TRAINCTL_HOME/fleet.db``. A URL is
``postgresql://USER@HOST:PORT/DB`` and never carries a password: libpq reads it from
``PGPASSWORD``, a ``~/.pgpass`` or ``PGPASSFILE``, so it appears in no flag, file, log, error,
``--json`` output or workflow input. A URL with one is refused without being repeated.
"""

from __future__ import annotations

import os
from pathlib import Path

from sqlalchemy.engine import URL, make_url
from sqlalchemy.exc import ArgumentError

from orchestrator.contracts.errors import PermanentError

#: The environment variable naming the store (a URL, or a SQLite file's path).
STORE_ENV = "TRAINCTL_STORE"
#: The file under ``TRAINCTL_HOME`` where ``fleet init --store`` keeps the URL.
STORE_FILE = "store"
#: The SQLite file under ``TRAINCTL_HOME``: the store when none is named.
FLEET_FILE = "fleet.db"

#: A store: a SQLite file, or a PostgreSQL URL (checked, without a password).
StoreRef = Path | str

_SCHEMES = ("postgresql", "postgres")
_HINT = "give it in PGPASSWORD, a ~/.pgpass file or PGPASSFILE"
#: The highest TCP port: libpq would only say a larger one "did not answer" once connecting.
_MAX_PORT = 65_535


class BadStore(PermanentError):
    """A store URL that cannot be used (field ``store``; exit 2). Never repeats the URL when it
    carried a password."""

    def __init__(self, message: str) -> None:
        super().__init__(message, field="store")


def _parse(text: str) -> URL:
    try:
        url = make_url(text)
    except (ArgumentError, ValueError):
        raise BadStore("store: not a URL of the form postgresql://USER@HOST:PORT/DB") from None
    if url.password is not None or "password" in {k.lower() for k in url.query}:
        raise BadStore(f"store: the URL must not carry a password; {_HINT}")
    if url.get_backend_name() not in _SCHEMES or url.drivername not in _SCHEMES:
        raise BadStore(
            f"store: {url.drivername}:// is not a store trainctl knows; use "
            "postgresql://USER@HOST:PORT/DB (or leave it out for the SQLite file)"
        )
    if not url.host or not url.database:
        raise BadStore(
            f"store: {public_url_of(url)} names no host or database; use "
            "postgresql://USER@HOST:PORT/DB"
        )
    if url.port is not None and not 1 <= url.port <= _MAX_PORT:
        raise BadStore(f"store: port {url.port} is not a TCP port (1 to {_MAX_PORT})")
    return url


def check_store_url(text: str) -> str:
    """``text`` as a store URL (``postgresql://USER@HOST:PORT/DB``), or BadStore (field
    ``store``): a password in it, another scheme, no host or database."""
    return public_url_of(_parse(text.strip()))


def public_url_of(url: URL) -> str:
    return url.set(password=None).render_as_string(hide_password=True)


def is_url(ref: StoreRef) -> bool:
    return isinstance(ref, str) and "://" in ref


def describe(ref: StoreRef) -> str:
    """What ``fleet status`` says of a store: the URL (it carries no secret) or the path."""
    return str(ref)


def driver_url(url: str) -> URL:
    """SQLAlchemy's URL for a checked store URL (PostgreSQL through psycopg 3)."""
    return _parse(url).set(drivername="postgresql+psycopg")


def resolve_store(home: Path) -> StoreRef:
    """The store of the fleet under ``home``: ``TRAINCTL_STORE``, else the URL in
    ``home/store``, else the SQLite file ``home/fleet.db``."""
    named = os.environ.get(STORE_ENV, "").strip()
    if not named:
        try:
            named = (home / STORE_FILE).read_text(encoding="utf-8").strip()
        except FileNotFoundError:
            named = ""
        except OSError as err:
            raise BadStore(f"store: cannot read {home / STORE_FILE}: {err.strerror}") from None
    if not named:
        return home / FLEET_FILE
    if "://" in named:
        return check_store_url(named)
    return Path(named).expanduser()


__all__ = [
    "FLEET_FILE",
    "STORE_ENV",
    "STORE_FILE",
    "BadStore",
    "StoreRef",
    "check_store_url",
    "describe",
    "driver_url",
    "is_url",
    "resolve_store",
]
