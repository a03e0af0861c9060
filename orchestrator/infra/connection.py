"""Where and how trainctl reaches Temporal: address, namespace, TLS/mTLS and API key.

The settings come from ``temporalio.envconfig``, exactly as the Temporal CLI and SDKs read them:
a TOML profile (``$TEMPORAL_CONFIG_FILE``, else ``~/.config/temporalio/temporal.toml``; profile
``$TEMPORAL_PROFILE``, else ``default``) overridden by ``TEMPORAL_*`` environment variables
(``TEMPORAL_ADDRESS``, ``TEMPORAL_NAMESPACE``, ``TEMPORAL_API_KEY``, ``TEMPORAL_TLS``,
``TEMPORAL_TLS_SERVER_CA_CERT_PATH``, ``TEMPORAL_TLS_CLIENT_CERT_PATH``,
``TEMPORAL_TLS_CLIENT_KEY_PATH``, ``TEMPORAL_TLS_SERVER_NAME``, ...), overridden in turn by the
command's flags (:class:`ConnectionOptions`). One ``temporal.toml`` thus points the worker, every
``trainctl`` command and the ``temporal`` CLI at the same cluster.

Secrets (the API key, gRPC metadata such as an ``authorization`` header) live only in the
:class:`Resolved` value handed to ``Client.connect``: its ``repr`` hides them, :meth:`describe`
is what may be shown or logged, and :func:`redact` scrubs them from any message that leaves.
There is deliberately no ``--api-key`` flag: a command line is visible to every local user
(``ps``); a key comes from the profile, ``$TEMPORAL_API_KEY`` or ``--api-key-file``.

The embedded dev server (``trainctl demo``, ``trainctl server``'s own checks) is reached with
``local=True``: profiles and ``TEMPORAL_*`` describe the user's cluster, not the embedded one.
"""

from __future__ import annotations

import dataclasses
import os
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import temporalio.service
from temporalio.envconfig import ClientConfigProfile, ClientConfigTLS

DEFAULT_ADDRESS = "localhost:7233"
DEFAULT_NAMESPACE = "default"
#: What a secret is replaced by wherever it would otherwise appear.
REDACTED = "***"


class ConnectionError_(ValueError):  # noqa: N801 - not the builtin ConnectionError (an OSError)
    """A connection setting that cannot be used; ``field`` names it (``tls_ca``, ``profile``)."""

    def __init__(self, message: str, field: str) -> None:
        super().__init__(f"{field}: {message}")
        self.field = field


@dataclass(frozen=True)
class ConnectionOptions:
    """What the command line says; None leaves the profile's (or environment's) setting."""

    address: str | None = None
    namespace: str | None = None
    profile: str | None = None
    config_file: Path | None = None
    tls: bool | None = None
    tls_ca: Path | None = None
    tls_cert: Path | None = None
    tls_key: Path | None = None
    tls_server_name: str | None = None
    api_key_file: Path | None = None
    #: The embedded dev server: ignore profiles and TEMPORAL_* entirely.
    local: bool = False


@dataclass(frozen=True)
class Resolved:
    """Everything ``Client.connect`` needs; ``repr`` and :meth:`describe` never show secrets."""

    address: str
    namespace: str
    tls: bool | temporalio.service.TLSConfig = field(repr=False)
    api_key: str | None = field(default=None, repr=False)
    rpc_metadata: Mapping[str, str] = field(default_factory=dict, repr=False)
    profile: str | None = None

    @property
    def secrets(self) -> list[str]:
        """Every secret value this connection carries (to scrub from messages)."""
        out = [self.api_key] if self.api_key else []
        return out + [v for v in self.rpc_metadata.values() if v]

    def describe(self) -> dict[str, Any]:
        """What may be printed or logged: where, and which kinds of credentials, never values."""
        tls = self.tls
        return {
            "address": self.address,
            "namespace": self.namespace,
            "profile": self.profile,
            "tls": bool(tls),
            "mtls": isinstance(tls, temporalio.service.TLSConfig) and tls.client_cert is not None,
            "api_key": self.api_key is not None,
        }

    def connect_kwargs(self) -> dict[str, Any]:
        kwargs: dict[str, Any] = {"namespace": self.namespace, "tls": self.tls}
        if self.api_key is not None:
            kwargs["api_key"] = self.api_key
        if self.rpc_metadata:
            kwargs["rpc_metadata"] = dict(self.rpc_metadata)
        return kwargs


#: Every secret this process resolved, so the log processor can scrub them from any line.
_SEEN: set[str] = set()


def known_secrets() -> frozenset[str]:
    """The secrets resolved so far in this process (API keys, gRPC metadata values, and any
    other credential handed to :func:`remember_secrets`)."""
    return frozenset(_SEEN)


def remember_secrets(values: Iterable[str]) -> None:
    """Scrub ``values`` from every log line from now on (a credential this process read for
    another service, such as the Prometheus gate's password and its basic-auth token)."""
    _SEEN.update(v for v in values if v)


def redact(text: str, secrets: Iterable[str]) -> str:
    """``text`` with every secret (longest first, so a prefix never leaks the rest) replaced."""
    for secret in sorted((s for s in secrets if s), key=len, reverse=True):
        text = text.replace(secret, REDACTED)
    return text


def resolve(opts: ConnectionOptions | None = None) -> Resolved:
    """The connection ``opts`` mean, over the envconfig profile and ``TEMPORAL_*``.

    Raises:
        ConnectionError_: a named profile or file that does not exist or cannot be read.
    """
    opts = opts or ConnectionOptions()
    if opts.local:
        return Resolved(
            address=opts.address or DEFAULT_ADDRESS,
            namespace=opts.namespace or DEFAULT_NAMESPACE,
            tls=False,
        )
    profile = _load_profile(opts)
    api_key = profile.api_key
    if opts.api_key_file is not None:
        api_key = _read(opts.api_key_file, "api_key_file").decode().strip()
        if not api_key:
            raise ConnectionError_(f"{opts.api_key_file} is empty", "api_key_file")
    address = check_address(opts.address or profile.address or DEFAULT_ADDRESS)
    profile = dataclasses.replace(
        profile,
        address=address,
        namespace=opts.namespace or profile.namespace or DEFAULT_NAMESPACE,
        api_key=api_key,
        tls=_tls(profile.tls, opts),
    )
    try:  # reads the certificate files a profile names
        cfg = profile.to_client_connect_config()
    except OSError as err:
        raise ConnectionError_(
            f"cannot read {err.filename or 'a TLS file'}: {err.strerror or err}", "profile"
        ) from None
    out = Resolved(
        address=cfg["target_host"],
        namespace=cfg.get("namespace") or DEFAULT_NAMESPACE,
        tls=cfg.get("tls", False),
        api_key=cfg.get("api_key"),
        rpc_metadata=dict(cfg.get("rpc_metadata") or {}),
        profile=opts.profile or os.environ.get("TEMPORAL_PROFILE"),
    )
    _SEEN.update(out.secrets)
    return out


def _load_profile(opts: ConnectionOptions) -> ClientConfigProfile:
    source = opts.config_file
    field_ = "config_file"
    if source is None and os.environ.get("TEMPORAL_CONFIG_FILE"):
        source, field_ = Path(os.environ["TEMPORAL_CONFIG_FILE"]), "TEMPORAL_CONFIG_FILE"
    if source is not None and not source.is_file():
        # envconfig reads a missing file as an empty one: a typo would connect elsewhere.
        raise ConnectionError_(f"no such file {source}", field_)
    try:
        return ClientConfigProfile.load(profile=opts.profile, config_source=source)
    except Exception as err:  # the bridge's ConfigError: a missing profile, bad TOML
        raise _config_error(str(err), source) from None


_TOML_AT = re.compile(r"at line (\d+), column (\d+)")
#: A quoted or backticked piece of an error that holds letters or digits: maybe a value.
_QUOTED = re.compile(r"`[^`]*[A-Za-z0-9][^`]*`|\"[^\"]*[A-Za-z0-9][^\"]*\"|'[^']*[A-Za-z0-9][^']*'")


def _config_error(text: str, source: Path | None) -> ConnectionError_:
    """The envconfig loader's error, said without the file's text (a line may hold an api_key).

    The bridge quotes the offending line (``4 | api_key = "..."``) and sometimes the value
    (``invalid type: integer `12345```); only the file, the line and column, and what is
    wrong (values cut out) are kept. A profile that does not exist names ``profile``.
    """
    flat = " ".join(text.split())
    where = str(source) if source is not None else "the Temporal config file"
    if flat.startswith("Profile ") and flat.endswith("not found"):
        return ConnectionError_(flat, "profile")
    m = _TOML_AT.search(text)
    if m is None:
        if "utf-8" in flat:
            return ConnectionError_(f"{where} is not UTF-8 text", "config_file")
        return ConnectionError_(f"{where} cannot be read as a Temporal config file", "config_file")
    lines = [ln.strip() for ln in text.strip().splitlines() if ln.strip()]
    what = lines[-1] if lines and "|" not in lines[-1] else "invalid TOML"
    what = _QUOTED.sub("...", what)
    return ConnectionError_(
        f"{where} is not a valid Temporal config file (line {m.group(1)}, column "
        f"{m.group(2)}): {what}",
        "config_file",
    )


def check_address(address: str) -> str:
    """``address`` if it is ``host:port`` (port 1-65535, no scheme), else ConnectionError_."""
    text = address.strip()
    if "://" in text:
        raise ConnectionError_(
            f"{text[:80]!r} has a scheme; write host:port (e.g. localhost:7233)", "address"
        )
    host, sep, port = text.rpartition(":")
    if not sep or not host or not port.isdigit():
        raise ConnectionError_(f"{text[:80]!r} is not host:port (e.g. localhost:7233)", "address")
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    if (
        not host
        or any(c.isspace() or c in "/?#@" for c in host)
        or (":" in host and not all(c in "0123456789abcdefABCDEF:." for c in host))
    ):
        raise ConnectionError_(f"{text[:80]!r} is not host:port (e.g. localhost:7233)", "address")
    if not 1 <= int(port) <= 65535:
        raise ConnectionError_(f"port {int(port)} is out of range (1-65535)", "address")
    return text


def _tls(base: ClientConfigTLS | None, opts: ConnectionOptions) -> ClientConfigTLS | None:
    """The profile's TLS settings with the flags laid over them (paths checked here)."""
    files = {"tls_ca": opts.tls_ca, "tls_cert": opts.tls_cert, "tls_key": opts.tls_key}
    for name, path in files.items():
        if path is not None:
            _read(path, name)
    if (opts.tls_cert is None) != (opts.tls_key is None) and (
        base is None or (base.client_cert is None) != (opts.tls_cert is None)
    ):
        missing = "tls_key" if opts.tls_key is None else "tls_cert"
        raise ConnectionError_("mTLS needs both --tls-cert and --tls-key", missing)
    wants = any(files.values()) or opts.tls_server_name is not None
    if opts.tls is False:
        return ClientConfigTLS(disabled=True)
    if not wants and opts.tls is None:
        return base
    base = base or ClientConfigTLS()
    return dataclasses.replace(
        base,
        disabled=False,
        server_name=opts.tls_server_name or base.server_name,
        server_root_ca_cert=opts.tls_ca or base.server_root_ca_cert,
        client_cert=opts.tls_cert or base.client_cert,
        client_private_key=opts.tls_key or base.client_private_key,
    )


def _read(path: Path, field_: str) -> bytes:
    try:
        return path.read_bytes()
    except OSError as err:
        raise ConnectionError_(f"cannot read {path}: {err.strerror or err}", field_) from None
