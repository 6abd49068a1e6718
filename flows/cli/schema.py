"""``flows schema``: the JSON Schema of flow files, generated from :mod:`flows.flowfile.model`."""

from __future__ import annotations

import json

import click

from flows.flowfile.model import json_schema


def register(group: click.Group) -> None:
    group.add_command(schema)


@click.command()
def schema() -> None:
    """Print the JSON Schema of flow files (point your editor's YAML support at it)."""
    click.echo(json.dumps(json_schema(), indent=2))
