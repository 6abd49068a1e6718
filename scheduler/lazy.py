"""Package namespaces whose public names are imported on first use (PEP 562), so that importing
one small module of a package does not load the rest of it (and redis with it)."""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from typing import Any


def lazy_exports(
    package: str, scope: dict[str, Any], exports: Mapping[str, str]
) -> Callable[[str], Any]:
    """A module ``__getattr__`` for ``package``: each name in ``exports`` (name -> module) is
    imported from its module when first asked for, then kept in ``scope`` (the package's
    globals), so later lookups do not come here."""

    def __getattr__(name: str) -> Any:
        module = exports.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(module), name)
        scope[name] = value
        return value

    return __getattr__
