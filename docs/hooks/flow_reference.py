"""MkDocs hook: the flow file reference, generated from the JSON Schema that `flows schema` prints.

A page holding the line ``<!-- flow-schema -->`` gets, in its place, one table per object of the
schema (each field, its type, default and description), so the reference cannot drift from the
model that validates the files.
"""

from __future__ import annotations

import json
from typing import Any

MARKER = "<!-- flow-schema -->"


def on_page_markdown(markdown: str, **_: Any) -> str:
    if MARKER not in markdown:
        return markdown
    from flows.model import json_schema  # imported here: only this page needs the package

    return markdown.replace(MARKER, render(json_schema()))


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
