"""The generated reference pages: the flow file reference, from the JSON Schema that
`flows schema` prints, and the CLI reference, from the command line itself.

Their generated parts are committed between markers, so the pages read in the repository as on
the site: ``<!-- flow-schema -->`` ... ``<!-- /flow-schema -->`` in flow-reference.md (one table
per object of the schema: each field, its type, default and description) and ``<!-- cli -->``
... ``<!-- /cli -->`` in cli.md (each command: its usage, help and options).

    python docs/hooks/flow_reference.py           # rewrite them from the code
    python docs/hooks/flow_reference.py --check   # exit 1 when they drifted (a test runs this)

As an MkDocs hook it fills the same parts at build time, so the site cannot drift either.
"""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

PAGES = Path(__file__).resolve().parents[1] / "pages"
REGENERATE = "python docs/hooks/flow_reference.py"


def _flow_schema() -> str:
    from flows.flowfile.model import json_schema  # imported here: only these pages need the package

    return render(json_schema())


def _cli() -> str:
    from flows.cli import main

    return render_cli(main)


# page -> (marker name, what goes between its markers)
GENERATED: dict[str, tuple[str, Callable[[], str]]] = {
    "flow-reference.md": ("flow-schema", _flow_schema),
    "cli.md": ("cli", _cli),
}


def fill(markdown: str, name: str, content: str) -> str:
    """``markdown`` with the part between ``<!-- name -->`` and ``<!-- /name -->`` replaced."""
    pattern = re.compile(rf"(<!-- {name} -->\n).*?(<!-- /{name} -->)", re.DOTALL)
    return pattern.sub(lambda m: m.group(1) + content.rstrip("\n") + "\n" + m.group(2), markdown)


def on_page_markdown(markdown: str, page: Any = None, **_: Any) -> str:
    source = getattr(getattr(page, "file", None), "src_uri", "")
    if source in GENERATED:
        name, make = GENERATED[source]
        return fill(markdown, name, make())
    return markdown


def main(argv: list[str]) -> int:
    check = "--check" in argv
    drifted = []
    for page, (name, make) in GENERATED.items():
        path = PAGES / page
        text = path.read_text()
        fresh = fill(text, name, make())
        if fresh != text:
            drifted.append(page)
            if not check:
                path.write_text(fresh)
    if check and drifted:
        print(f"out of date: {', '.join(drifted)}; regenerate them: {REGENERATE}")
        return 1
    return 0


# -- the CLI reference ------------------------------------------------------------------------


def render_cli(group: Any) -> str:
    """Markdown for every command of ``group`` (a click group), subcommands under theirs."""
    import click

    root = click.Context(group, info_name="flows")
    sections: list[str] = []

    def visit(command: click.Command, parent: click.Context, name: str) -> None:
        ctx = click.Context(command, info_name=name, parent=parent)
        path = ctx.command_path
        lines = [f"### `{path}`", ""]
        help_text = (command.help or "").strip()
        if help_text:
            lines += [_plain(help_text), ""]
        usage = " ".join(command.collect_usage_pieces(ctx))
        lines += ["```", f"{path} {usage}", "```", ""]
        rows = [
            record
            for param in command.get_params(ctx)
            if isinstance(param, click.Option)  # arguments are named in the usage line
            and (record := param.get_help_record(ctx))
            and record[0] != "--help"
        ]
        if rows:
            lines += ["| option | what it does |", "|---|---|"]
            for opts, what in rows:
                cell = " ".join(what.split()).replace("|", "\\|")
                lines.append(f"| `{opts}` | {cell} |")
            lines.append("")
        sections.append("\n".join(lines))
        if isinstance(command, click.Group):
            visit_all(command, ctx)

    def visit_all(holder: click.Group, ctx: click.Context) -> None:
        # list_commands/get_command, not .commands: the `flows` group loads its commands lazily
        for sub_name in sorted(holder.list_commands(ctx)):
            sub = holder.get_command(ctx, sub_name)
            if sub is not None:
                visit(sub, ctx, sub_name)

    visit_all(group, root)
    return "\n".join(sections)


def _plain(text: str) -> str:
    """A command's help as Markdown paragraphs (click's \\b markers dropped)."""
    paragraphs = [p.replace("\b\n", "").strip() for p in text.split("\n\n")]
    return "\n\n".join(" ".join(p.split()) for p in paragraphs if p)


# -- the flow file reference ------------------------------------------------------------------


def render(schema: dict[str, Any]) -> str:
    """Markdown for the schema: the top-level object first, then each definition by name."""
    sections = [_section(schema.get("title", "Flow file"), schema, anchor="flow-file")]
    for name, definition in sorted(schema.get("$defs", {}).items()):
        if definition.get("properties"):
            sections.append(_section(name, definition, anchor=name.lower()))
    return "\n\n".join(sections)


def _section(title: str, definition: dict[str, Any], anchor: str) -> str:
    lines = [f"### {title} {{#{anchor}}}", ""]
    if definition.get("description"):
        lines += [definition["description"], ""]
    lines += ["| field | type | default | description |", "|---|---|---|---|"]
    required = set(definition.get("required", []))
    for field, spec in definition["properties"].items():
        name = f"`{field}`" + (" (required)" if field in required else "")
        default = f"`{json.dumps(spec['default'])}`" if "default" in spec else ""
        description = " ".join(str(spec.get("description", "")).split()).replace("|", "\\|")
        lines.append(f"| {name} | {_type(spec)} | {default} | {description} |")
    return "\n".join(lines)


def _type(spec: dict[str, Any]) -> str:
    """A short type name: `string`, `integer ≥ 1`, `list of Step`, `Retry or null`, ..."""
    if "$ref" in spec:
        name = spec["$ref"].rsplit("/", 1)[-1]
        return f"[{name}](#{name.lower()})"
    for combined in ("anyOf", "oneOf"):
        if combined in spec:
            return " or ".join(dict.fromkeys(_type(option) for option in spec[combined]))
    kind = spec.get("type", "any")
    if kind == "array":
        return f"list of {_type(spec.get('items', {}))}"
    if kind == "object" and isinstance(spec.get("additionalProperties"), dict):
        return f"map of {_type(spec['additionalProperties'])}"
    if "enum" in spec:
        return " \\| ".join(f"`{json.dumps(value)}`" for value in spec["enum"])
    if "const" in spec:
        return f"`{json.dumps(spec['const'])}`"
    if isinstance(kind, list):
        return " or ".join(str(k) for k in kind)
    bounds = [f"≥ {spec['minimum']}"] if "minimum" in spec else []
    bounds += [f"≤ {spec['maximum']}"] if "maximum" in spec else []
    return " ".join([str(kind), *bounds])


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
    sys.exit(main(sys.argv[1:]))
