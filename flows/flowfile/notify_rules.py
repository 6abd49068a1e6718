"""``notify:`` rules of a flow and of its steps: who is told what, as the flow file says it. Pure.

A rule names the events (``on``) and one channel: a ``webhook`` (JSON, signed with a secret),
a ``slack`` incoming webhook, or ``email`` over SMTP. What a run needs of them travels with it:
:func:`run_rules` (the run record's ``notify`` field, read by the deliverer,
:mod:`scheduler.notify`) and :func:`job_flags` (the kinds each job's engine calls write to the
outbox, ``lua/include/notify.lua``).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from typing import Annotated, Any, Final, Literal
from urllib.parse import urlsplit

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    StringConstraints,
    model_validator,
)
from pydantic_core import PydanticCustomError

from scheduler.hosts import is_loopback

Event = Literal["failure", "success", "retries_exhausted", "awaiting", "deadline"]
EVENTS: Final = ("failure", "success", "retries_exhausted", "awaiting", "deadline")

SecretName = Annotated[str, StringConstraints(pattern=r"^[A-Za-z_][A-Za-z0-9_]*$", max_length=128)]
"""A secret's name (an environment variable's, or a file's under the secrets folder)."""

_ADDRESS = re.compile(r"^[^@\s<>,;]+@[^@\s<>,;]+\.[^@\s<>,;]+$|^[^@\s<>,;]+@localhost$")


def _problem(kind: str, message: str, hint: str) -> PydanticCustomError:
    return PydanticCustomError(kind, "{message}", {"message": message, "hint": hint})


_USERINFO = re.compile(r"^((?:[A-Za-z][A-Za-z0-9+.-]*:)?//)?[^/?#@]*@")


def shown_url(value: str) -> str:
    """``value`` as a message quotes it: a user and password before the host shown as
    ``***`` (a finding is printed, and a CI log keeps it)."""
    return _USERINFO.sub(lambda m: f"{m.group(1) or ''}***@", value, count=1)


# Where the credentials of a URL that holds them go instead: they would be stored with every
# run and shown wherever the channel is named.
_CREDENTIALS_HINT: Final = {
    "http": (
        "put the whole URL in a secret and name it with url_secret: NAME (its user and "
        "password are then sent as HTTP Basic authentication)"
    ),
    "smtp": "name a secret holding user:password with login: NAME",
}


def _url(schemes: tuple[str, ...]) -> AfterValidator:
    def check(value: str) -> str:
        parts = urlsplit(value)
        shown = shown_url(value)
        if parts.scheme not in schemes or not parts.hostname:
            raise _problem(
                "url",
                f"malformed URL '{shown}': expected {' or '.join(s + '://' for s in schemes)}"
                "HOST[:PORT]...",
                f"write for example '{schemes[0]}://127.0.0.1:9000/hook'",
            )
        if "@" in parts.netloc:
            raise _problem(
                "url",
                f"URL '{shown}' holds a user or password: it would be stored with every run "
                "and shown wherever the channel is named",
                _CREDENTIALS_HINT[schemes[0]],
            )
        try:
            parts.port  # noqa: B018 - raises on a port that is not a number
        except ValueError:
            raise _problem("url", f"malformed URL '{shown}': bad port", "1 to 65535") from None
        return value

    return AfterValidator(check)


HttpUrl = Annotated[str, Field(max_length=2048), _url(("http", "https"))]
SmtpUrl = Annotated[str, Field(max_length=2048), _url(("smtp", "smtps"))]


def _address(value: str) -> str:
    if not _ADDRESS.match(value):
        raise _problem("address", f"not an email address: '{value}'", "write name@example.com")
    return value


Address = Annotated[str, Field(max_length=254), AfterValidator(_address)]


class _Model(BaseModel):
    model_config = ConfigDict(
        extra="forbid", frozen=True, strict=True, use_attribute_docstrings=True
    )


class _Endpoint(_Model):
    url: HttpUrl | None = None
    url_secret: SecretName | None = None
    """Instead of `url`: the name of a secret holding it (a Slack webhook's URL is a credential:
    this way it is not stored with the run)."""

    @model_validator(mode="after")
    def _one_url(self) -> _Endpoint:
        if (self.url is None) == (self.url_secret is None):
            raise _problem(
                "notify_url",
                "give exactly one of url and url_secret",
                "url: https://... , or url_secret: NAME for a URL that is itself a secret",
            )
        return self


class Webhook(_Endpoint):
    """A JSON POST; with a `secret`, signed: `X-Flows-Signature: sha256=<hex>` (HMAC-SHA256 of
    `<X-Flows-Timestamp>.<body>`)."""

    secret: SecretName | None = None
    """The name of the secret that signs the body (resolved where notifications are sent)."""


class Slack(_Endpoint):
    """A Slack-compatible incoming webhook (`{"text": ...}`; Mattermost, Rocket.Chat and
    Discord's `/slack` endpoints take it too)."""


class Email(_Model):
    """A mail over SMTP: `smtps://` is TLS from the start; `smtp://` upgrades with STARTTLS
    unless `starttls: false` (a loopback relay)."""

    to: Annotated[list[Address], Field(min_length=1, max_length=50)]
    smtp: SmtpUrl
    """`smtp://HOST:PORT` (STARTTLS) or `smtps://HOST:PORT` (TLS)."""
    starttls: bool = True
    """Upgrade an `smtp://` connection with STARTTLS (ignored for `smtps://`)."""
    login: SecretName | None = None
    """The name of a secret holding `user:password` for the SMTP login."""
    from_: Address | None = Field(default=None, alias="from")
    """The sender (default: flows@ the sending host's name)."""

    @model_validator(mode="after")
    def _login_not_in_clear(self) -> Email:
        # Without TLS the SMTP login crosses the network as base64 of user:password: it is
        # taken only where no network is crossed.
        parts = urlsplit(self.smtp)
        in_clear = parts.scheme == "smtp" and not self.starttls
        if self.login and in_clear and not is_loopback(parts.hostname or ""):
            raise _problem(
                "notify_login",
                f"starttls: false with a login would send the login in clear to {parts.hostname}",
                "keep starttls (the default) or use smtps://; false is for a relay on loopback",
            )
        return self


class NotifyRule(_Model):
    """On which events whom to tell, by one channel: `webhook`, `slack` or `email`."""

    on: Annotated[list[Event], Field(min_length=1, max_length=5)] = Field(
        default_factory=lambda: list[Event](["failure"])
    )
    """Events: failure, success, retries_exhausted, awaiting (a wait step starts waiting),
    deadline. On a flow, failure and success are the run's; on a step, the step's own."""
    webhook: Webhook | None = None
    slack: Slack | None = None
    email: Email | None = None

    @model_validator(mode="after")
    def _one_channel(self) -> NotifyRule:
        given = [name for name in ("webhook", "slack", "email") if getattr(self, name) is not None]
        if len(given) != 1:
            raise _problem(
                "notify_channel",
                "a notify rule needs exactly one channel"
                + (f", not {' and '.join(given)}" if given else ""),
                "add one of webhook: {url}, slack: {url} or email: {to, smtp}",
            )
        return self

    def secret_names(self) -> list[str]:
        """The secrets this rule's channel needs where it is sent."""
        names: list[str] = []
        for endpoint in (self.webhook, self.slack):
            if endpoint is not None and endpoint.url_secret:
                names.append(endpoint.url_secret)
        if self.webhook is not None and self.webhook.secret:
            names.append(self.webhook.secret)
        if self.email is not None and self.email.login:
            names.append(self.email.login)
        return names


class WebhookTrigger(_Model):
    """`POST /api/v1/hooks/<flow>` starts a run when signed with the secret: header
    `X-Flows-Signature: sha256=<hex>` (HMAC-SHA256 of `<X-Flows-Timestamp>.<body>`)."""

    secret: SecretName
    """The name of the secret the sender signs with (resolved by `flows ui`)."""
    param: Annotated[str, StringConstraints(pattern=r"^[A-Za-z_][A-Za-z0-9_-]*$")] = "payload"
    """The declared param (type object) that receives the request's JSON body."""


class Triggers(_Model):
    """What else starts a run of this flow, besides `flows run`, a schedule and the API."""

    webhook: WebhookTrigger | None = None


NotifyRules = Annotated[list[NotifyRule], Field(max_length=20)]

# What the engine writes for a job (lua/include/notify.lua), per rule event, on a step and on
# the flow: `run` makes every job of the run check for the run's end.
_STEP_KINDS: Final = {
    "failure": "failure",
    "retries_exhausted": "failure",
    "success": "success",
    "awaiting": "awaiting",
}
_FLOW_KINDS: Final = {
    "failure": "run",
    "success": "run",
    "retries_exhausted": "failure",
    "awaiting": "awaiting",
}


def job_flags(flow_rules: Sequence[NotifyRule], step_rules: Sequence[NotifyRule]) -> str | None:
    """The `notify` flag of a job of a step with ``step_rules`` in a flow with ``flow_rules``:
    the kinds its engine calls write to the outbox (None: it writes none)."""
    kinds = {_FLOW_KINDS[e] for rule in flow_rules for e in rule.on if e in _FLOW_KINDS}
    kinds |= {_STEP_KINDS[e] for rule in step_rules for e in rule.on if e in _STEP_KINDS}
    return " ".join(sorted(kinds)) or None


def rule_record(rule: NotifyRule, step: str | None) -> dict[str, Any]:
    """One rule as the run record holds it: ``{on, step, <channel>: {...}}`` (``step`` None: the
    flow's own)."""
    record = rule.model_dump(by_alias=True, exclude_none=True)
    record["step"] = step
    return record


def run_rules(
    flow_rules: Sequence[NotifyRule], step_rules: Iterable[tuple[str, Sequence[NotifyRule]]]
) -> list[dict[str, Any]]:
    """Every rule of a run, the flow's first (the run record's ``notify``; empty: none)."""
    records = [rule_record(rule, None) for rule in flow_rules]
    for step, rules in step_rules:
        records.extend(rule_record(rule, step) for rule in rules)
    return records
