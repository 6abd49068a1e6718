"""``flows graph FILE [--format mermaid|dot]``: the step graph, for docs and reviews."""

from __future__ import annotations

from pathlib import Path

import click

from flows import gc_pause
from flows.cli.options import flow_file
from flows.cli.validate import load_or_exit
from flows.flowfile.dag import to_dot, to_mermaid


def register(group: click.Group) -> None:
    group.add_command(graph)


@click.command()
@click.argument("file", type=flow_file)
@click.option(
    "--format",
    "output_format",
    type=click.Choice(["mermaid", "dot"]),
    default="mermaid",
    show_default=True,
    help="mermaid (GitHub renders it) or dot (Graphviz: ... --format dot | dot -Tsvg).",
)
def graph(file: Path, output_format: str) -> None:
    """Print the steps of FILE and their needs as a Mermaid or DOT graph."""
    gc_pause.enable()  # a short single-threaded command: see flows.gc_pause
    result = load_or_exit(file)
    assert result.flow is not None
    render = to_dot if output_format == "dot" else to_mermaid
    click.echo(render(result.flow), nl=False)
