"""What each ``flows`` command imports: ``--help`` nothing heavy, the web framework only ``flows
ui``, the readers of runs neither the flow model, the validation library nor the web framework
(each command is run in a fresh interpreter, and what it loaded is read from ``sys.modules``)."""

from __future__ import annotations

import importlib
import json
import os
import subprocess
import sys
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from flows.cli import COMMAND_MODULES, main
from flows.cli.catalog import COMMANDS
from flows.cli.lazy import LazyGroup
from flows.cli.write_catalog import read_catalog
from scheduler.engine.client import Client

WEB = ("fastapi", "starlette", "uvicorn", "jinja2")
FLOW_MODEL = ("networkx", "yaml", "flows.flowfile.model", "flows.validation.validate")
# The readers parse the engine's run document into plain dataclasses (flows.runs.read): the
# validation library's import and model building cost a reader a fifth of its start.
READERS_NEVER = frozenset({*WEB, *FLOW_MODEL, "pydantic"})
ALL = (*WEB, *FLOW_MODEL, "pydantic", "redis", "rich", "prometheus_client")

_RUN = """
import json, sys
from flows.cli import main
try:
    main(sys.argv[1:], prog_name="flows", standalone_mode=False)
except SystemExit:
    pass
except Exception as error:  # a command's own error: what it imported still counts
    print(type(error).__name__, error, file=sys.stderr)
print(json.dumps(sorted(sys.modules)))
"""


def loaded_by(*args: str, url: str | None = None) -> set[str]:
    """The heavy modules (of :data:`ALL`) that ``flows ARGS...`` imports in a new interpreter."""
    env = dict(os.environ, FLOWS_REDIS_URL=url) if url is not None else None
    done = subprocess.run(
        [sys.executable, "-c", _RUN, *args],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
        cwd=Path(__file__).resolve().parents[2],
        env=env,
    )
    modules = set(json.loads(done.stdout.strip().splitlines()[-1]))
    packages = {module.split(".")[0] for module in modules}
    return {name for name in ALL if name in modules or name in packages}


def test_help_imports_no_command_and_nothing_heavy() -> None:
    assert loaded_by("--help") == set()


def test_help_lists_every_command_as_the_loaded_commands_would() -> None:
    """The listing made from the catalog is the one click makes from the commands themselves."""
    lazy = CliRunner().invoke(main, ["--help"], terminal_width=100)
    eager = click.Group(name="main")  # click's own listing, of the commands themselves
    for module in COMMAND_MODULES:
        importlib.import_module(f"flows.cli.{module}").register(eager)
    listed = CliRunner().invoke(eager, ["--help"], terminal_width=100)
    assert lazy.exit_code == listed.exit_code == 0
    assert lazy.output.partition("Commands:")[2] == listed.output.partition("Commands:")[2]
    for name in COMMANDS:
        assert f"\n  {name} " in lazy.output


def test_the_catalog_is_current() -> None:
    """Stale after a command was added, renamed or its first sentence changed: run
    ``python -m flows.cli.write_catalog``."""
    assert read_catalog(COMMAND_MODULES) == COMMANDS


def test_a_module_missing_from_the_catalog_still_gives_its_commands() -> None:
    group = LazyGroup(name="flows", modules=["schema", "graph"], catalog={})
    context = click.Context(group)
    assert {"schema", "graph"} <= set(group.list_commands(context))
    assert group.get_command(context, "graph") is not None


def test_a_command_newer_than_the_catalog_still_runs() -> None:
    """A module the catalog knows, with a command it does not (yet): found by loading them all."""
    group = LazyGroup(
        name="flows",
        modules=["schema", "graph"],
        catalog={"schema": ("schema", "Print the JSON Schema.")},
    )
    context = click.Context(group)
    assert group.get_command(context, "graph") is not None
    assert group.get_command(context, "no-such-command") is None


@pytest.mark.parametrize("module", sorted({module for module, _ in COMMANDS.values()}))
def test_only_flows_ui_imports_the_web_framework(module: str) -> None:
    command = next(name for name, (owner, _) in sorted(COMMANDS.items()) if owner == module)
    loaded = loaded_by(command, "--help")
    if module == "ui":
        assert "fastapi" in loaded
    else:
        assert not loaded & set(WEB), f"flows {command} imports {sorted(loaded & set(WEB))}"


def _one_run(client: Client) -> str:
    from datetime import UTC, datetime

    from flows.expand.jobs import expand
    from flows.runs.build import assemble_run
    from flows.runs.submit import submit
    from flows.validation.validate import validate_text

    text = "version: 1\nname: reads\nsteps:\n  a: {job: m.f}\n  b: {job: m.f, needs: [a]}\n"
    flow = validate_text(text, file="reads.yaml").flow
    assert flow is not None
    run_id = "reads@1"
    puts = expand(flow, run_id=run_id, logical_time=datetime.now(UTC))
    submit(client, assemble_run(run_id, flow.name, puts, params={}))
    return run_id


@pytest.mark.parametrize("args", [("runs",), ("status",), ("status", "reads@1"), ("jobs",)])
def test_the_readers_import_redis_but_no_flow_model(
    url: str, client: Client, args: tuple[str, ...]
) -> None:
    _one_run(client)
    loaded = loaded_by(*args, url=url)
    assert "redis" in loaded  # they did read the server
    assert not loaded & READERS_NEVER, f"flows {' '.join(args)} imports {sorted(loaded)}"


def test_flows_validate_does_not_import_redis(tmp_path: Path) -> None:
    flow = tmp_path / "ok.yaml"
    flow.write_text("version: 1\nname: ok\nsteps:\n  a: {job: m.f}\n")
    loaded = loaded_by("validate", str(flow))
    assert "pydantic" in loaded
    assert not loaded & {"redis", *WEB}
    # The graph library is for a flow with a cycle, or a step reading beyond its needs.
    assert "networkx" not in loaded
