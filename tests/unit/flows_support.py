"""Helpers for the flows unit tests: validate YAML text and pick findings out."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from textwrap import dedent

from flows.flowfile.findings import Finding
from flows.flowfile.model import Flow
from flows.validation.validate import validate_text

# 2026-01-01 00:00 UTC: schedule checks look ahead from here (DST changes in 2026).
NOW = datetime(2026, 1, 1, tzinfo=UTC).timestamp()


def check(text: str, *, flow_dir: Path = Path("."), check_imports: bool = False) -> list[Finding]:
    """Every finding for ``text`` (dedented), as ``flows validate`` reports them."""
    result = validate_text(
        dedent(text), file="flow.yaml", flow_dir=flow_dir, check_imports=check_imports, now=NOW
    )
    return result.findings


def one(text: str, code: str, **options: object) -> Finding:
    """The single finding with ``code``; fails listing everything found otherwise."""
    findings = check(text, **options)  # type: ignore[arg-type]
    matching = [f for f in findings if f.code == code]
    assert len(matching) == 1, "\n".join(f.format() for f in findings)
    return matching[0]


def valid(text: str) -> Flow:
    """The flow of ``text``; fails with the findings when it has errors."""
    result = validate_text(dedent(text), file="flow.yaml", now=NOW)
    assert result.flow is not None, "\n".join(f.format() for f in result.findings)
    return result.flow
