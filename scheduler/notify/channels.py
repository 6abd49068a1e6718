"""Sending one notification by one channel: a signed JSON webhook, a Slack-compatible incoming
webhook, or a mail over SMTP (TLS or STARTTLS, login from a secret). Each raises
:class:`DeliveryError` (one line: what failed and where) when the receiver did not take it."""

from __future__ import annotations

import base64
import contextlib
import hashlib
import hmac
import http.client
import json
import re
import smtplib
import socket
import ssl
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Mapping
from email.message import EmailMessage
from typing import Any, Final
from urllib.parse import unquote, urlsplit, urlunsplit

from scheduler.notify.events import Context, Event, payload, summary, text
from scheduler.secrets import MissingSecret, Secrets, mask

TIMEOUT: Final = 10.0
SIGNATURE_HEADER: Final = "X-Flows-Signature"
TIMESTAMP_HEADER: Final = "X-Flows-Timestamp"
EVENT_HEADER: Final = "X-Flows-Event-Id"
USER_AGENT: Final = "redis-flows-notify/1"


class DeliveryError(Exception):
    """A delivery the receiver refused or could not take (the message says which and why).
    ``final``: sending it again would get the same answer (the receiver said the request
    itself is wrong), so the channel is given up at once instead of retried."""

    def __init__(self, message: str, *, final: bool = False) -> None:
        super().__init__(message)
        self.final = final


#: 4xx answers that say "later", not "never": a time-out, too early, too many requests.
TRANSIENT_4XX: Final = frozenset({408, 425, 429})


def sign(secret: str, timestamp: str, body: bytes) -> str:
    """``sha256=<hex>``: HMAC-SHA256 with ``secret`` of ``<timestamp>.<body>``."""
    digest = hmac.new(secret.encode(), timestamp.encode() + b"." + body, hashlib.sha256)
    return "sha256=" + digest.hexdigest()


def verify(secret: str, timestamp: str, body: bytes, signature: str) -> bool:
    """Whether ``signature`` is :func:`sign`'s for this timestamp and body (constant time)."""
    # Compared as bytes: compare_digest raises TypeError on text holding non-ASCII characters,
    # and a header is whatever the sender chose. Such a signature cannot match: it is wrong.
    given = signature.encode("utf-8", "surrogatepass")
    return hmac.compare_digest(sign(secret, timestamp, body).encode(), given)


class _NoRedirects(urllib.request.HTTPRedirectHandler):
    """Refuse every redirect: urllib follows a 301/302/303 of a POST as a GET without the body
    (the event lost, yet counted delivered) and sends the signature headers along to wherever
    the receiver points; a 3xx is a refusal like any status but 2xx."""

    def redirect_request(self, *args: Any, **kwargs: Any) -> None:
        return None  # urllib then raises the 3xx as an HTTPError


DEADLINE: Final = 30.0
"""Seconds a POST may take in all: ``TIMEOUT`` bounds each wait for a byte, not a receiver that
sends one every few seconds, which would hold every notification behind it for ever."""


def _tracking(http_class: Any, opened: list[socket.socket]) -> Any:
    """``http_class`` noting the socket of each connection it makes (urllib lets go of the
    connection once the headers are read: the body is read from its socket still)."""

    def connection(*args: Any, **kwargs: Any) -> http.client.HTTPConnection:
        made: http.client.HTTPConnection = http_class(*args, **kwargs)
        connect = made.connect

        def connect_noted() -> None:
            connect()
            if made.sock is not None:
                opened.append(made.sock)

        made.connect = connect_noted  # type: ignore[method-assign]
        return made

    return connection


class _Tracked(urllib.request.AbstractHTTPHandler):
    """Notes the socket of each connection it opens, for :func:`_open` to cut at its deadline
    (mixed into the http and the https handler)."""

    def __init__(self, opened: list[socket.socket]) -> None:
        super().__init__()
        self.opened = opened

    def do_open(self, http_class: Any, req: Any, **kwargs: Any) -> Any:
        return super().do_open(_tracking(http_class, self.opened), req, **kwargs)


class _HttpTracked(_Tracked, urllib.request.HTTPHandler):
    pass


class _HttpsTracked(_Tracked, urllib.request.HTTPSHandler):
    pass


def _cut(opened: list[socket.socket], late: threading.Event) -> None:
    """Past the deadline: shut the POST's connection, which ends the read it waits in."""
    late.set()
    for sock in opened:
        with contextlib.suppress(OSError):
            sock.shutdown(socket.SHUT_RDWR)


def _open(url: str, body: bytes, headers: Mapping[str, str], shown: str) -> None:
    """The POST itself, within :data:`DEADLINE`."""
    request = urllib.request.Request(url, data=body, method="POST")
    request.add_header("Content-Type", "application/json")
    request.add_header("User-Agent", USER_AGENT)
    for name, value in headers.items():
        request.add_header(name, value)
    opened: list[socket.socket] = []
    late = threading.Event()
    opener = urllib.request.build_opener(_NoRedirects, _HttpTracked(opened), _HttpsTracked(opened))
    timer = threading.Timer(DEADLINE, _cut, (opened, late))
    timer.daemon = True
    timer.start()
    try:
        with opener.open(request, timeout=TIMEOUT) as response:
            response.read(65536)
    except Exception:
        if not late.is_set():
            raise
    finally:
        timer.cancel()
    # Cut short, the answer may even read as a whole one (its headers ended by the cut): it
    # is not taken as one.
    if late.is_set():
        raise DeliveryError(f"POST {shown}: no whole answer in {DEADLINE:g}s")


def _basic_auth(url: str) -> tuple[str, dict[str, str]]:
    """``url`` without the user and password before its host, and the HTTP Basic
    ``Authorization`` header they make (urllib would take them for a part of the host name)."""
    parts = urlsplit(url)
    if "@" not in parts.netloc:
        return url, {}
    user, password = unquote(parts.username or ""), unquote(parts.password or "")
    host = parts.netloc.rpartition("@")[2]
    credentials = base64.b64encode(f"{user}:{password}".encode()).decode()
    return urlunsplit(parts._replace(netloc=host)), {"Authorization": f"Basic {credentials}"}


def _post(url: str, body: bytes, headers: Mapping[str, str], shown: str = "") -> None:
    """POST ``body``; an error names ``shown`` (the URL, unless the URL is a secret). A user
    and password in the URL (one kept in a secret) are sent as HTTP Basic authentication."""
    secret_url = bool(shown)
    shown = shown or url
    url, auth = _basic_auth(url)
    try:
        _open(url, body, {**headers, **auth}, shown)
    except urllib.error.HTTPError as error:
        said = f"POST {shown}: HTTP {error.code} {error.reason}"
        if 300 <= error.code < 400:
            # Where it points is said for a URL written in the flow, not for one kept secret.
            location = error.headers.get("Location") if error.headers else None
            to = f", to {location}" if location and not secret_url else ""
            said += (
                f"{to}: redirects are not followed (name the address it redirects to in the rule)"
            )
        final = 400 <= error.code < 500 and error.code not in TRANSIENT_4XX
        if final:
            said += " (a refusal of the request itself: not retried)"
        raise DeliveryError(said, final=final) from None
    except (urllib.error.URLError, OSError, ValueError, http.client.HTTPException) as error:
        reason = str(getattr(error, "reason", error))
        if secret_url:  # a refusal may quote the URL or a part of it: not one kept secret
            parts = urlsplit(url)
            reason = mask(reason, (url, parts.netloc, parts.path, parts.query))
        raise DeliveryError(f"POST {shown}: {reason}") from None


def _secret(secrets: Secrets, name: str) -> str:
    try:
        return secrets.resolve(name)
    except MissingSecret as error:
        raise DeliveryError(str(error)) from None


_NOT_IN_URL: Final = re.compile(r"[\x00-\x20\x7f-\x9f\s]")
"""What a URL never holds (http.client refuses it)."""


def _url(config: Mapping[str, Any], secrets: Secrets) -> tuple[str, str]:
    """The endpoint and how errors name it: ``url``, or the value of the secret ``url_secret``
    names (checked here, as `flows validate` checks a written one; errors name the secret)."""
    if config.get("url_secret"):
        name = str(config["url_secret"])
        url = _secret(secrets, name).strip()  # as urllib strips it
        if urlsplit(url).scheme not in ("http", "https"):
            raise DeliveryError(f"secret {name} does not hold an http(s) URL")
        if _NOT_IN_URL.search(url):
            # Said here, without the value: http.client's refusal quotes the URL's path, which
            # for a Slack hook is the credential itself.
            raise DeliveryError(
                f"secret {name} does not hold an http(s) URL: it holds white space or a "
                "control character"
            )
        return url, f"(the URL in secret {name})"
    return str(config["url"]), ""


def url_problem(channel: str, config: Mapping[str, Any], secrets: Secrets) -> str | None:
    """Why ``channel``'s URL cannot be sent to, found without sending: the one a secret holds
    is no http(s) URL (as a send would say it; None: nothing known against it)."""
    if channel not in ("webhook", "slack"):
        return None
    try:
        _url(config, secrets)
    except DeliveryError as error:
        return str(error)
    return None


def send_webhook(
    config: Mapping[str, Any], event: Event, name: str, context: Context, secrets: Secrets
) -> None:
    body = json.dumps(payload(event, name, context), separators=(",", ":")).encode()
    timestamp = str(int(time.time()))
    headers = {EVENT_HEADER: event.id, TIMESTAMP_HEADER: timestamp}
    if config.get("secret"):
        headers[SIGNATURE_HEADER] = sign(_secret(secrets, config["secret"]), timestamp, body)
    url, shown = _url(config, secrets)
    _post(url, body, headers, shown)


def send_slack(
    config: Mapping[str, Any], event: Event, name: str, context: Context, secrets: Secrets
) -> None:
    body = json.dumps({"text": slack_text(text(event, name, context))}).encode()
    url, shown = _url(config, secrets)
    _post(url, body, {EVENT_HEADER: event.id}, shown)


def slack_text(plain: str) -> str:
    """``plain`` as Slack shows text: ``&``, ``<`` and ``>`` escaped as its API asks. A job's
    failure may hold ``<!channel>`` (which pages the whole channel) or ``<url|words>`` (a link
    that reads as anything); escaped, they are shown as written."""
    return plain.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def message_id(event: Event, name: str, to: str) -> str:
    """The mail's ``Message-ID``: the same for every delivery of one event to one rule's
    recipients (a re-delivery after a crash shows once in a mail client), different for
    another event or rule. Nothing random, nothing from the clock."""
    rule = hashlib.sha256(f"{name}\0{to}".encode()).hexdigest()[:12]
    return f"<{event.id.replace('-', '.')}.{rule}@redis-flows>"


def send_email(
    config: Mapping[str, Any], event: Event, name: str, context: Context, secrets: Secrets
) -> None:
    url = urlsplit(str(config["smtp"]))
    host = url.hostname or "localhost"
    tls = url.scheme == "smtps"
    port = url.port or (465 if tls else 25)
    message = EmailMessage()
    message["Subject"] = summary(event, name, context)[:200]
    message["From"] = config.get("from") or f"flows@{socket.gethostname()}"
    message["To"] = ", ".join(config.get("to") or ())
    message["Message-ID"] = message_id(event, name, message["To"])
    message[EVENT_HEADER] = event.id
    message.set_content(text(event, name, context))
    login = None
    if config.get("login"):
        user, sep, password = _secret(secrets, config["login"]).partition(":")
        if not sep:
            raise DeliveryError(f"secret {config['login']} must be user:password for SMTP login")
        if not (user + password).isascii():
            # smtplib sends a login as ASCII; its error would quote the character and where.
            raise DeliveryError(
                f"secret {config['login']} holds a character outside ASCII, which an SMTP "
                "login cannot carry"
            )
        login = (user, password)
    context_tls = ssl.create_default_context()
    try:
        smtp: smtplib.SMTP
        if tls:
            smtp = smtplib.SMTP_SSL(host, port, timeout=TIMEOUT, context=context_tls)
        else:
            smtp = smtplib.SMTP(host, port, timeout=TIMEOUT)
        with smtp:
            if not tls and config.get("starttls", True):
                smtp.starttls(context=context_tls)
            if login:
                smtp.login(*login)
            smtp.send_message(message)
    except (smtplib.SMTPException, OSError) as error:
        raise DeliveryError(f"SMTP {host}:{port}: {str(error).splitlines()[0][:200]}") from None


Sender = Callable[[Mapping[str, Any], Event, str, Context, Secrets], None]
SENDERS: Final[dict[str, Sender]] = {
    "webhook": send_webhook,
    "slack": send_slack,
    "email": send_email,
}


def channel_of(rule: Mapping[str, Any]) -> tuple[str, Mapping[str, Any]] | None:
    """The rule's one channel: (its name, its settings)."""
    for name in SENDERS:
        config = rule.get(name)
        if isinstance(config, Mapping):
            return name, config
    return None


SECRET_FIELDS: Final = {
    "webhook": ("url_secret", "secret"),
    "slack": ("url_secret",),
    "email": ("login",),
}
"""The fields of each channel that name a secret (resolved where the notification is sent)."""


def secret_names(channel: str, config: Mapping[str, Any]) -> list[str]:
    """The secrets a channel's settings name: what a sender must resolve to send by it."""
    return [str(config[key]) for key in SECRET_FIELDS.get(channel, ()) if config.get(key)]


def describe(rule: Mapping[str, Any]) -> str:
    """``webhook http://...`` / ``email ops@example.com``: where a rule sends, for listings."""
    found = channel_of(rule)
    if found is None:
        return "?"
    name, config = found
    if name == "email":
        return f"email {', '.join(config.get('to') or ())}"
    where = config.get("url") or f"(secret {config.get('url_secret', '')})"
    return f"{name} {where}"
