"""Resolve a job's ``klass`` (a dotted path) to the callable that runs it, once per process.

``pkg.mod.func``          a function taking the job
``pkg.mod.Class``         a class: ``Class.<queue>`` if it has an attribute named after the job's
                          queue (the qless convention), else ``Class.process``; static and class
                          methods are called on the class, plain methods on a new instance
"""

from __future__ import annotations

import importlib
import inspect
import os
import sys
import threading
from collections.abc import Callable, Iterable
from typing import Any

from scheduler.engine.errors import FlowsError

JobFunction = Callable[[Any], Any]


class KlassNotFound(ImportError):
    """The klass does not import or names nothing callable."""


_cache: dict[tuple[str, str], JobFunction] = {}
_lock = threading.Lock()
# The folders put first on the import path, each with why, in order: a module found in none is
# said with where it was looked for.
_folders: dict[str, str] = {}


def add_paths(paths: Iterable[str], why: str = "the job's import path") -> None:
    """Make folders importable (a flow's folder, so its `job:` modules resolve); ``why``: what
    they are, as a module found in none says it."""
    for path in paths:
        if path and path not in sys.path:
            sys.path.insert(0, path)
            _folders.setdefault(path, why)


def import_path(extra: Iterable[str] = ()) -> list[str]:
    """Put the working directory, then ``extra`` folders, first on the import path, as absolute
    paths (a job's sandbox becomes the working directory later, so a relative entry would move).

    Every worker mode calls this at start, so ``klass`` modules next to where the worker was
    started import the same way in a pool child and in ``flows worker --processes 0``.
    Returns the folders added, in order.
    """
    folders = [os.getcwd(), *(os.path.abspath(path) for path in extra)]
    for folder in reversed(folders):
        while folder in sys.path:
            sys.path.remove(folder)
        sys.path.insert(0, folder)
    _folders.update({folder: "--path" for folder in folders[1:]})
    _folders[folders[0]] = "where the worker started"
    return folders


def _import(klass: str) -> Any:
    module_name, _, attribute = klass.rpartition(".")
    if not module_name:
        raise KlassNotFound(f"klass {klass!r} is not a dotted path (module.callable)")
    try:
        module = importlib.import_module(module_name)
    except ImportError as error:
        raise KlassNotFound(
            f"cannot import module {module_name!r} for klass {klass!r}: {error}"
            + _not_found_in(module_name, error)
        ) from error
    try:
        return getattr(module, attribute)
    except AttributeError as error:
        raise KlassNotFound(
            f"module {module_name!r} has no attribute {attribute!r}" + _main_hint(module_name)
        ) from error


def _main_hint(module_name: str) -> str:
    """What to do when the klass names ``__main__``: a function put from a script run as
    ``python script.py`` is stored under that name, which in the worker is its own main."""
    if module_name != "__main__":
        return ""
    return (
        ": '__main__' is the worker's own main module, not the script that put the job: put"
        " the function in a module the worker can import, and the job by that module's path"
    )


def _not_found_in(module_name: str, error: ImportError) -> str:
    """Where a module that is not there was looked for, and what to do (empty when it is
    there, and what failed is its own import of another module)."""
    missing = error.name if isinstance(error, ModuleNotFoundError) else None
    if not missing or not (module_name + ".").startswith(missing + "."):
        return ""
    looked = ", ".join(f"{f} ({why})" for f, why in _folders.items() if f in sys.path)
    return (
        f" in {looked or 'the import path'} or the installed packages: start the worker in "
        "the folder that holds it, or add that folder with --path"
    )


def _method_of(cls: type, queue: str) -> JobFunction:
    name = queue if hasattr(cls, queue) and queue.isidentifier() else "process"
    raw = inspect.getattr_static(cls, name, None)
    if raw is None:
        raise KlassNotFound(
            f"class {cls.__qualname__} has neither a {queue!r} nor a 'process' method"
        )
    if isinstance(raw, staticmethod | classmethod):
        method: JobFunction = getattr(cls, name)
        return method
    bound: JobFunction = getattr(cls(), name)
    return bound


def resolve(klass: str, queue: str) -> JobFunction:
    """The callable for ``klass`` in ``queue`` (cached). Raises KlassNotFound."""
    key = (klass, queue)
    found = _cache.get(key)
    if found is not None:
        return found
    with _lock:
        target = _import(klass)
        if inspect.isclass(target):
            found = _method_of(target, queue)
        elif callable(target):
            found = target
        else:
            raise KlassNotFound(f"klass {klass!r} is not callable")
        _check_takes_the_job(klass, found)
        _cache[key] = found
        return found


def _check_takes_the_job(klass: str, function: JobFunction) -> None:
    """Refuse a callable that cannot be called with the job alone: called, it would raise a
    TypeError from the worker's own frame, and be retried to the same end."""
    try:
        signature = inspect.signature(function)
    except (TypeError, ValueError):  # no signature to read (a builtin): let the call decide
        return
    try:
        signature.bind(None)
    except TypeError as error:
        name = getattr(function, "__name__", klass.rpartition(".")[2])
        why = "takes no argument" if not signature.parameters else f"cannot take it alone: {error}"
        raise KlassNotFound(
            f"klass {klass!r} cannot be given the job: {name}{signature} {why} (a job function"
            f" takes one, the job: def {name}(job))"
        ) from None


class HookNotFound(FlowsError):
    """A hook named in the settings (``--prepare module:function``) does not import, or names
    nothing callable: the worker cannot start (and a pool does not start it again)."""


def hook_form_problem(spec: str) -> str | None:
    """Why ``spec`` does not name a hook as ``module:function``, or None when it does (whether
    it imports is :func:`load_object`'s to find)."""
    module, _, name = spec.partition(":")
    return None if module and name else f"{spec!r} is not of the form module:function"


def load_object(spec: str, option: str = "--prepare") -> Any:
    """The callable named by ``module:attribute`` (a hook given as the setting ``option``);
    :class:`HookNotFound`, naming the option, when it cannot be had."""
    problem = hook_form_problem(spec)
    if problem is not None:
        raise HookNotFound(f"{option}: {problem}")
    module, _, name = spec.partition(":")
    try:
        found = getattr(importlib.import_module(module), name)
    except AttributeError:
        raise HookNotFound(f"{option} {spec!r}: module {module!r} has no {name!r}") from None
    except Exception as error:  # ImportError, or whatever the module raised as it ran
        raise HookNotFound(
            f"{option} {spec!r}: cannot import module {module!r}: {type(error).__name__}: {error}"
        ) from error
    if not callable(found):
        raise HookNotFound(f"{option} {spec!r}: {name!r} is not callable")
    return found
