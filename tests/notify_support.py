"""Real receivers on loopback for notification tests: an HTTP server that records every POST
(and can refuse or hold them), and an SMTP server (aiosmtpd) that records every mail."""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from email import message_from_bytes
from email.message import Message
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from aiosmtpd.controller import Controller


@dataclass
class Received:
    path: str
    headers: dict[str, str]
    body: bytes
    method: str = "POST"

    def json(self) -> Any:
        return json.loads(self.body)


@dataclass
class Receiver:
    """Records each request. ``status`` is the reply's code (with ``location`` as its
    ``Location`` header when set: a redirect); ``hold`` (set) keeps each request open until
    ``release`` is set (a delivery in progress)."""

    server: ThreadingHTTPServer
    received: list[Received] = field(default_factory=list)
    status: int = 200
    location: str = ""
    trickle: bool = False
    """Answer a long body a byte at a time, one every 50 ms (until the sender goes)."""
    hold: threading.Event = field(default_factory=threading.Event)
    release: threading.Event = field(default_factory=threading.Event)
    arrived: threading.Condition = field(default_factory=threading.Condition)

    @property
    def url(self) -> str:
        host, port = self.server.server_address[:2]
        return f"http://{host!s}:{port}"

    def wait_for(self, count: int, timeout: float = 30.0) -> list[Received]:
        with self.arrived:
            self.arrived.wait_for(lambda: len(self.received) >= count, timeout)
            return list(self.received)


def _handler(receiver_box: list[Receiver]) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            receiver = receiver_box[0]
            length = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(length)
            with receiver.arrived:
                received = Received(self.path, dict(self.headers.items()), body, self.command)
                receiver.received.append(received)
                receiver.arrived.notify_all()
            if receiver.hold.is_set():
                receiver.release.wait(60)
            if receiver.trickle:
                self._trickle()
                return
            self.send_response(receiver.status)
            if receiver.location:
                self.send_header("Location", receiver.location)
            self.send_header("Content-Length", "0")
            self.end_headers()

        do_GET = do_POST  # a sender that followed a redirect as a GET is recorded too

        def _trickle(self) -> None:
            self.wfile.write(b"HTTP/1.1 200 OK\r\nContent-Length: 100000\r\n\r\n")
            for _ in range(1200):  # a minute at most
                try:
                    self.wfile.write(b".")
                    self.wfile.flush()
                except OSError:
                    return  # the sender hung up
                time.sleep(0.05)

        def log_message(self, format: str, *args: Any) -> None:
            pass

    return Handler


def start_receiver() -> Receiver:
    box: list[Receiver] = []
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(box))
    server.daemon_threads = True
    receiver = Receiver(server)
    box.append(receiver)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return receiver


def receiver_fixture() -> Iterator[Receiver]:
    receiver = start_receiver()
    try:
        yield receiver
    finally:
        receiver.release.set()
        receiver.server.shutdown()
        receiver.server.server_close()


class _Mailbox:
    def __init__(self) -> None:
        self.messages: list[Message] = []
        self.envelopes: list[tuple[str, list[str]]] = []
        self.arrived = threading.Condition()

    async def handle_DATA(self, server: Any, session: Any, envelope: Any) -> str:
        with self.arrived:
            self.messages.append(message_from_bytes(envelope.content))
            self.envelopes.append((envelope.mail_from, list(envelope.rcpt_tos)))
            self.arrived.notify_all()
        return "250 Message accepted for delivery"

    def wait_for(self, count: int, timeout: float = 30.0) -> list[Message]:
        with self.arrived:
            self.arrived.wait_for(lambda: len(self.messages) >= count, timeout)
            return list(self.messages)


@dataclass
class SmtpServer:
    controller: Controller
    mailbox: _Mailbox

    @property
    def url(self) -> str:
        return f"smtp://127.0.0.1:{self.controller.port}"


def smtp_fixture() -> Iterator[SmtpServer]:
    mailbox = _Mailbox()
    with socket.socket() as probe:  # the controller cannot start on port 0: pick a free one
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    controller = Controller(mailbox, hostname="127.0.0.1", port=port)
    controller.start()
    try:
        yield SmtpServer(controller, mailbox)
    finally:
        controller.stop()
