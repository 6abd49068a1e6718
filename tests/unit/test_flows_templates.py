"""Template parsing and rendering (:mod:`flows.flowfile.templates`): the same answers for a text
parsed the first time, found again among the kept parses, or too long to be kept."""

from __future__ import annotations

from typing import Any

import pytest

from flows.flowfile.templates import (
    KEEP,
    Reference,
    TemplateSyntaxError,
    references,
    render,
    whole_reference,
)

LONG = " " * 2000  # past the length of the texts whose parse is kept


def _lookup(reference: Reference) -> Any:
    if reference.root == "steps":
        return KEEP
    return {"params.n": 3, "params.list": [1, 2], "run.id": "r1"}[str(reference)]


@pytest.mark.parametrize("pad", ["", LONG])
@pytest.mark.parametrize("times", [1, 2])  # the second time, a kept parse is used
def test_texts_render_the_same_every_time(pad: str, times: int) -> None:
    for _ in range(times):
        assert render(f"{pad}${{{{ params.list }}}}", _lookup) == [1, 2]
        assert render(f"{pad}n=${{{{params.n}}}}, id=${{{{ run.id }}}}!", _lookup) == (
            f"{pad}n=3, id=r1!"
        )
        kept = f"{pad}a ${{{{ steps.x.outputs.y }}}} b ${{{{ params.n }}}}"
        assert render(kept, _lookup) == f"{pad}a ${{{{ steps.x.outputs.y }}}} b 3"
        assert render(f"{pad}${{{{ steps.x.status }}}} ", _lookup) == (
            f"{pad}${{{{ steps.x.status }}}} "
        )


@pytest.mark.parametrize("pad", ["", LONG])
def test_references_and_whole_references(pad: str) -> None:
    for _ in range(2):
        assert references(f"{pad}${{{{ a.b }}}}-${{{{ c }}}}") == [
            Reference(("a", "b")),
            Reference(("c",)),
        ]
        assert whole_reference(f"{pad}${{{{ a.b }}}} ") == Reference(("a", "b"))
        assert whole_reference(f"{pad}x ${{{{ a.b }}}}") is None
        assert whole_reference(f"{pad}no template") is None


@pytest.mark.parametrize("pad", ["", LONG])
def test_bad_templates_raise_every_time(pad: str) -> None:
    for _ in range(2):
        with pytest.raises(TemplateSyntaxError, match="not closed"):
            references(f"{pad}${{{{ a.b }}}} and ${{{{ c")
        with pytest.raises(TemplateSyntaxError, match="is not a reference"):
            references(f"{pad}${{{{ a.b }}}} ${{{{ 1x }}}}")
        with pytest.raises(TemplateSyntaxError, match="is not a reference"):
            whole_reference(f"{pad}${{{{ a b }}}}")
        # Rendering leaves an unclosed '${{' as text.
        assert render(f"{pad}${{{{ params.n }}}} ${{{{ c", _lookup) == f"{pad}3 ${{{{ c"


@pytest.mark.parametrize("pad", ["", LONG])
def test_rendering_looks_up_the_templates_before_a_bad_one(pad: str) -> None:
    seen: list[Reference] = []

    def lookup(reference: Reference) -> Any:
        seen.append(reference)
        return 1

    with pytest.raises(TemplateSyntaxError):
        render(f"{pad}${{{{ params.n }}}} ${{{{ 1x }}}}", lookup)
    assert seen == [Reference(("params", "n"))]
