"""``flows ui``: the REST API, live events and metrics over HTTP (the dashboard's process)."""

from __future__ import annotations

import logging
import sys
from pathlib import Path

import click

from flows.cli.common import open_client, user_errors
from flows.cli.notifications import env_file_option, use_env_file
from flows.cli.options import connection
from flows.ui.auth import ENV_TOKEN, Auth, TokenError, is_loopback, load_token
from flows.ui.roles import RoleAuth
from flows.users import Users


def register(group: click.Group) -> None:
    group.add_command(ui)


@click.command()
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to listen on.")
@click.option(
    "--port",
    type=click.IntRange(0, 65535),
    default=8080,
    show_default=True,
    help="Port to listen on (0: any free port).",
)
@click.option(
    "--token-file",
    type=click.Path(dir_okay=False, path_type=Path),
    help=f"File holding the bearer token that writes (and non-loopback reads) need; "
    f"default ${ENV_TOKEN}. Without one, writes are refused.",
)
@click.option(
    "--read-only-open",
    is_flag=True,
    help="Answer reads without a token even on a non-loopback address.",
)
@click.option(
    "--flows-dir",
    type=click.Path(exists=True, file_okay=False, path_type=Path),
    default=None,
    help="A folder of flow files: every one is listed and can be started (scheduled or not), "
    "and its flows' webhook triggers are served.",
)
@env_file_option
@click.option(
    "--log-level", default="INFO", show_default=True, help="DEBUG, INFO, WARNING or ERROR."
)
@connection
def ui(
    host: str,
    port: int,
    token_file: Path | None,
    read_only_open: bool,
    flows_dir: Path | None,
    env_file: Path | None,
    log_level: str,
    redis_url: str | None,
    namespace: str | None,
) -> None:
    """Serve the dashboard (/), the REST API (/api/v1/, OpenAPI at /api/v1/openapi.json) and
    /metrics."""
    import uvicorn

    from flows.ui.app import create_app

    logging.basicConfig(
        level=log_level.upper(), stream=sys.stderr, format="%(asctime)s %(levelname)s %(message)s"
    )
    try:
        token = load_token(token_file)
    except TokenError as error:
        raise click.ClickException(str(error)) from None
    client = open_client(redis_url, namespace)
    users = Users(client)
    with user_errors():
        client.engine.load()
        has_users = users.any()
    if token is None and not has_users and not is_loopback(host) and not read_only_open:
        raise click.ClickException(
            f"listening on {host} needs a token (--token-file or ${ENV_TOKEN}) or a user "
            "(flows user add), or --read-only-open to answer reads from anyone without one"
        )
    base = Auth.for_server(token, host, read_only_open)
    use_env_file(env_file)  # the webhook triggers' secrets
    auth = RoleAuth(base.token, base.reads_open, users=users)
    app = create_app(client, auth, flows_dir.resolve() if flows_dir else None)
    config = uvicorn.Config(
        app,
        host=host,
        port=port,
        log_level=log_level.lower(),
        access_log=False,
        server_header=False,
        timeout_graceful_shutdown=5,  # open event streams would otherwise hold the stop forever
    )
    server = uvicorn.Server(config)
    click.echo(
        f"flows ui on http://{host}:{port} (dashboard /, API /api/v1/, metrics /metrics; writes "
        f"{'need the token' if token else 'disabled: no token'})",
        err=True,
    )
    server.run()
    sys.exit(0 if server.started else 1)
