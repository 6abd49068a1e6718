"""Notifications: the engine's outbox (``P notify:outbox``, ``lua/include/notify.lua``) delivered
to webhooks, Slack-compatible incoming webhooks and SMTP, at least once, each event with a stable
id (the stream entry's). :mod:`.events` says what an entry means and whom it concerns,
:mod:`.channels` sends one, :mod:`.outbox` delivers them with retries and keeps what failed."""
