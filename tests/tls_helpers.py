"""Certificates made by ``openssl`` and a TLS-terminating proxy in front of a Temporal server.

The proxy terminates TLS (optionally demanding a client certificate signed by the test CA) and
forwards plain gRPC to the dev server, as a load balancer in front of a secured cluster does.
It is HAProxy (Debian's ``haproxy``), not ``stunnel4``: Temporal's gRPC client (tonic) refuses a
TLS server that does not negotiate ALPN ``h2`` (``H2NotNegotiated``), and Debian's stunnel 5.68
has no ALPN at all.
"""

from __future__ import annotations

import contextlib
import shutil
import socket
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Pki:
    ca: Path
    server_cert: Path
    server_key: Path
    client_cert: Path
    client_key: Path
    other_cert: Path  # a client certificate the proxy's CA did not sign
    other_key: Path


def _openssl(*args: str, cwd: Path) -> None:
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True, timeout=60)


def _key_and_cert(d: Path, name: str, subject: str, ca: tuple[Path, Path] | None, ext: str) -> None:
    """An EC key and a certificate: self-signed (the CA, a stranger) or signed by ``ca``."""
    key = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]
    key += ["-subj", subject, "-keyout", f"{name}.key"]
    if ca is None:
        _openssl("req", "-x509", *key, "-days", "2", "-out", f"{name}.pem", "-addext", ext, cwd=d)
        return
    (d / f"{name}.ext").write_text(f"basicConstraints = CA:FALSE\n{ext.replace('=', ' = ', 1)}\n")
    _openssl("req", "-new", *key, "-out", f"{name}.csr", cwd=d)
    _openssl(
        "x509", "-req", "-in", f"{name}.csr", "-CA", str(ca[0]), "-CAkey", str(ca[1]),
        "-CAcreateserial", "-days", "2", "-out", f"{name}.pem", "-extfile", f"{name}.ext", cwd=d,
    )  # fmt: skip


def make_pki(d: Path) -> Pki:
    """A CA, a server certificate for localhost/127.0.0.1 and client certificates, by openssl."""
    d.mkdir(parents=True, exist_ok=True)
    _key_and_cert(d, "ca", "/CN=trainctl test CA", None, "basicConstraints=critical,CA:TRUE")
    ca = (d / "ca.pem", d / "ca.key")
    _key_and_cert(d, "server", "/CN=localhost", ca, "subjectAltName=DNS:localhost,IP:127.0.0.1")
    _key_and_cert(d, "client", "/CN=trainctl-worker", ca, "extendedKeyUsage=clientAuth")
    _key_and_cert(d, "other", "/CN=stranger", None, "basicConstraints=critical,CA:FALSE")
    return Pki(
        ca=d / "ca.pem",
        server_cert=d / "server.pem",
        server_key=d / "server.key",
        client_cert=d / "client.pem",
        client_key=d / "client.key",
        other_cert=d / "other.pem",
        other_key=d / "other.key",
    )


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def proxy_binary() -> str:
    found = shutil.which("haproxy")
    assert found, "scripts/test installs Debian's haproxy"
    return found


@contextlib.contextmanager
def tls_proxy(pki: Pki, backend: str, d: Path, require_client_cert: bool) -> Iterator[str]:
    """HAProxy on a free loopback port in front of ``backend``; yields its ``host:port``."""
    port = _free_port()
    bundle = d / "server-bundle.pem"  # HAProxy wants the certificate and its key in one file
    bundle.write_bytes(pki.server_cert.read_bytes() + pki.server_key.read_bytes())
    bind = f"bind 127.0.0.1:{port} ssl crt {bundle} alpn h2"
    if require_client_cert:
        bind += f" ca-file {pki.ca} verify required"
    conf = d / f"haproxy-{port}.cfg"
    conf.write_text(
        "\n".join(
            [
                "defaults",
                "    mode tcp",
                "    timeout connect 5s",
                "    timeout client 1h",
                "    timeout server 1h",
                "frontend temporal_tls",
                f"    {bind}",
                "    default_backend temporal",
                "backend temporal",
                f"    server dev {backend}",
                "",
            ]
        )
    )
    proc = subprocess.Popen(
        [proxy_binary(), "-db", "-f", str(conf)], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
    )
    try:
        deadline = time.monotonic() + 30
        while True:
            if proc.poll() is not None:
                raise AssertionError(f"haproxy exited: {proc.stderr.read() if proc.stderr else ''}")
            with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), 1):
                break
            assert time.monotonic() < deadline, "haproxy did not listen within 30 s"
            time.sleep(0.1)
        yield f"127.0.0.1:{port}"
    finally:
        proc.terminate()
        proc.wait(timeout=10)
