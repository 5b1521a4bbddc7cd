"""Workloads: the recurrent models whose gradients ckptbench measures.

A recurrence is an object with four methods (see :class:`Workload`): ``init``
draws ``(params, state0, inputs)``, ``step`` advances the state by one input,
``post`` maps a state to that step's output and ``loss`` reduces the stacked
outputs (leading axis = steps) to a scalar. A layer chain
(:mod:`ckptbench.workloads.chain`: ``init``, ``layer``, ``loss``) is a stack of layers
that differ (built-ins ``"mlp-stack"``, ``"cnn-stack"``, ``"transformer-stack"``:
:mod:`ckptbench.workloads.stacks`). Built-ins (``"rnn"``, ``"lstm"``, ...) are
declared once, for every backend, in :mod:`ckptbench.workloads.registry`; anything else is
a plug-in named ``"path/to/file.py:NAME"`` or ``"package.module:NAME"`` whose ``NAME`` is a
factory (see :func:`load_workload`).

This package only builds workloads: it never measures, prints or exits.
"""

from __future__ import annotations

import contextlib
import difflib
import hashlib
import importlib
import importlib.machinery
import importlib.util
import inspect
import os
import re
import stat
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from ckptbench.results.files import SHOWN_PATH_CHARS, shown_value
from ckptbench.results.inputs import NOT_A_FOLDER, file_with_slash, unreadable_text
from ckptbench.workloads import registry
from ckptbench.workloads.base import (
    REQUIRED_METHODS,
    SIZE_FIELDS,
    Sizes,
    Workload,
    WorkloadError,
    state_nbytes,
)
from ckptbench.workloads.chain import CHAIN_METHODS, is_chain
from ckptbench.workloads.lstm import LSTM
from ckptbench.workloads.rnn import RNN
from ckptbench.workloads.stacks import STACKS
from ckptbench.workloads.tracebacks import error_line

__all__ = [
    "BUILTIN_CHAINS",
    "BUILTIN_RECURRENCES",
    "BUILTIN_WORKLOADS",
    "LSTM",
    "RNN",
    "Sizes",
    "Workload",
    "WorkloadError",
    "build_workload",
    "checked_workload",
    "factories_cached",
    "factory_size_defaults",
    "find_module_file",
    "load_workload",
    "plugin_paths",
    "plugin_provenance",
    "plugin_source_file",
    "source_sha256",
    "state_nbytes",
]

#: Names accepted by :func:`load_workload` without a plug-in: the built-ins declared in
#: :mod:`ckptbench.workloads.registry` (which the loaders read).
BUILTIN_WORKLOADS: tuple[str, ...] = registry.names()
#: The built-in layer chains (``--steps`` is their depth) and the built-in recurrences.
BUILTIN_CHAINS: tuple[str, ...] = tuple(sorted(STACKS))
BUILTIN_RECURRENCES: tuple[str, ...] = tuple(n for n in BUILTIN_WORKLOADS if n not in STACKS)


def load_workload(spec: str, sizes: Sizes) -> Workload:
    """Build the workload named by ``spec`` at ``sizes``.

    ``spec`` is a built-in name (:data:`BUILTIN_WORKLOADS`) or a plug-in:

    * ``"path/to/file.py:NAME"`` — the file is executed as a fresh module (it is
      *not* put on ``sys.path``; a spec is a file when the part before the last
      ``:`` contains a path separator or ends in ``.py``);
    * ``"package.module:NAME"`` — imported with the normal import machinery.

    ``NAME`` (dots allowed, e.g. ``Class.build``) must be a callable factory. It
    is called with keyword arguments only, and only with the sizes it accepts:
    each of ``hidden``, ``batch``, ``input``, ``output`` that is a parameter of
    its signature, or all four if it takes ``**kwargs``; a factory whose
    signature cannot be inspected is called with no arguments. It must return
    an object with callable ``init``, ``step``, ``post`` and ``loss`` (a recurrence) or
    ``init``, ``layer`` and ``loss`` (a layer chain, :mod:`ckptbench.workloads.chain`).

    Every failure raises a one-line :class:`WorkloadError` (a ``ValueError``).
    """
    return checked_workload(spec, build_workload(spec, sizes))


def checked_workload(spec: str, workload: Any) -> Any:
    """``workload`` (what ``spec``'s factory returned) if it is a recurrence or a chain, else
    a one-line :class:`WorkloadError` naming the methods it lacks."""
    if is_chain(workload):
        return workload
    missing = [name for name in REQUIRED_METHODS if not callable(getattr(workload, name, None))]
    if missing:
        raise WorkloadError(
            f"workload {_shown(spec)} returned a {type(workload).__name__} without method(s): "
            f"{', '.join(missing)} (need {', '.join(REQUIRED_METHODS)}, or "
            f"{', '.join(CHAIN_METHODS)} for a layer chain)"
        )
    return workload


def build_workload(spec: str, sizes: Sizes) -> Any:
    """What the factory named by ``spec`` returns at ``sizes``, unchecked (a backend that
    turns other objects into workloads, e.g. torch's ``nn.Sequential`` into a chain, checks
    it itself); the spec and the factory's errors are :func:`load_workload`'s."""
    if not isinstance(sizes, Sizes):
        raise WorkloadError(f"sizes must be a Sizes instance, got {type(sizes).__name__}")
    # Sizes validates itself, but a frozen dataclass can still be forced; re-check.
    Sizes(**sizes.as_kwargs())
    if not isinstance(spec, str) or not spec.strip():
        raise WorkloadError(f"workload spec must be a non-empty string, got {_shown(spec)}")
    spec = spec.strip()

    factory: Callable[..., Any]
    if registry.is_builtin(spec):
        factory = registry.factory(spec, registry.NUMPY)
    elif (problem := registry.name_problem(spec)) is not None:
        raise WorkloadError(problem)
    elif _FACTORY_CACHE is not None and spec in _FACTORY_CACHE:
        factory = _FACTORY_CACHE[spec]
    else:
        factory = _resolve_factory(spec)
        if _FACTORY_CACHE is not None:
            _FACTORY_CACHE[spec] = factory

    return _call_factory(spec, factory, sizes)


#: While :func:`factories_cached` is active: spec -> resolved factory (one import per spec).
_FACTORY_CACHE: dict[str, Callable[..., Any]] | None = None


@contextlib.contextmanager
def factories_cached() -> Iterator[None]:
    """Within the block, a plug-in's module is executed once however often it is loaded (the
    plug-in check reads the factory's defaults, then loads it through the backend)."""
    global _FACTORY_CACHE
    previous, _FACTORY_CACHE = _FACTORY_CACHE, {} if _FACTORY_CACHE is None else _FACTORY_CACHE
    try:
        yield
    finally:
        _FACTORY_CACHE = previous


def factory_size_defaults(spec: str) -> dict[str, int]:
    """The sizes a plug-in's factory gives itself: each of ``hidden``, ``batch``, ``input``,
    ``output`` that its signature takes with a positive integer default (``make(hidden=64)``
    -> ``{"hidden": 64}``). Built-ins and uninspectable factories: ``{}``. Imports the
    plug-in (only ever called in a disposable worker)."""
    spec = spec.strip()
    if registry.is_builtin(spec) or ":" not in spec:
        return {}
    if _FACTORY_CACHE is not None and spec in _FACTORY_CACHE:
        factory = _FACTORY_CACHE[spec]
    else:
        factory = _resolve_factory(spec)
        if _FACTORY_CACHE is not None:
            _FACTORY_CACHE[spec] = factory
    try:
        params = inspect.signature(factory).parameters
    except (TypeError, ValueError):
        return {}
    found = {}
    for name in SIZE_FIELDS:
        default = params[name].default if name in params else None
        if isinstance(default, int) and not isinstance(default, bool) and default > 0:
            found[name] = default
    return found


def _shown(spec: str) -> str:
    """A plug-in spec, file or module as an error names it: quoted, cut only where very long."""
    return shown_value(spec, SHOWN_PATH_CHARS)


def _is_file_target(target: str) -> bool:
    return "/" in target or "\\" in target or target.endswith(".py")


def _resolve_factory(spec: str) -> Callable[..., Any]:
    target, _, name = spec.rpartition(":")
    if not target:
        raise WorkloadError(
            f"workload spec {_shown(spec)} has nothing before ':'; use {registry.PLUGIN_FORMS}"
        )
    if not name:
        raise WorkloadError(f"workload spec {_shown(spec)} has no factory NAME after ':'")
    if not all(part.isidentifier() for part in name.split(".")):
        raise WorkloadError(
            f"{shown_value(name)} in workload spec {_shown(target)}:NAME is "
            "not a valid attribute name"
        )

    module = _load_file(target) if _is_file_target(target) else _import_module(target)

    obj: Any = module
    for depth, part in enumerate(name.split(".")):
        try:
            obj = getattr(obj, part)
        except AttributeError:
            owner = target if depth == 0 else ".".join(name.split(".")[:depth])
            public = [n for n in dir(obj) if not n.startswith("_") and callable(getattr(obj, n))]
            near = (
                difflib.get_close_matches(part, public, n=1)
                or [n for n in public if n.lower() == part.lower()][:1]
            )
            hint = f" (did you mean {near[0]}?)" if near else ""
            raise WorkloadError(
                f"workload plug-in {_shown(owner)} has no attribute {part!r}{hint}"
            ) from None
    if not callable(obj):
        raise WorkloadError(
            f"workload factory {name!r} in {_shown(target)} is not callable (got "
            f"{type(obj).__name__})"
        )
    return obj


def _load_file(target: str) -> Any:
    path = Path(target).expanduser()
    if file_with_slash(os.path.expanduser(target)):  # pathlib dropped the '/': read the file
        raise WorkloadError(f"workload file {_shown(target)}: {NOT_A_FOLDER}")
    try:
        mode = path.stat().st_mode
    except OSError as err:  # named as typed ('~/x.py', 'x.py/'), as every missing file is
        what = unreadable_text(err, path)
        raise WorkloadError(f"workload file {_shown(target)}: {what}") from None
    if not stat.S_ISREG(mode):
        what = "is a directory, not a file" if stat.S_ISDIR(mode) else "is not a regular file"
        raise WorkloadError(f"workload file {_shown(target)} {what}")
    path = path.resolve()
    digest = hashlib.sha1(os.fsencode(path), usedforsecurity=False).hexdigest()[:10]  # any name
    stem = re.sub(r"\W", "_", path.stem)
    module_name = f"ckptbench_plugin_{stem}_{digest}"
    loader = importlib.machinery.SourceFileLoader(module_name, str(path))
    module_spec = importlib.util.spec_from_loader(module_name, loader)
    if module_spec is None:  # pragma: no cover - SourceFileLoader always yields a spec
        raise WorkloadError(f"cannot load workload file {str(path)!r}")
    module = importlib.util.module_from_spec(module_spec)
    # Registered before running, as a real import would be (dataclasses, pickle need it).
    sys.modules[module_name] = module
    try:
        loader.exec_module(module)
    except Exception as err:
        sys.modules.pop(module_name, None)
        why = error_line(err)
        raise WorkloadError(f"cannot import workload file {str(path)!r}: {why}") from None
    return module


def _import_module(target: str) -> Any:
    if not all(part.isidentifier() for part in target.split(".")):
        raise WorkloadError(
            f"workload module {_shown(target)} is not a valid module name (a file path must "
            "contain '/' or end in '.py')"
        )
    for folder in plugin_paths(f"{target}:_"):
        if folder not in sys.path:
            sys.path.append(folder)  # at the end: installed modules always win
    try:
        return importlib.import_module(target)
    except ModuleNotFoundError as err:
        if err.name == target:  # the module itself: named once
            raise WorkloadError(f"no workload module {_shown(target)}") from None
        raise WorkloadError(
            f"cannot import workload module {_shown(target)}: {error_line(err)}"
        ) from None
    except Exception as err:
        why = error_line(err)
        raise WorkloadError(f"cannot import workload module {_shown(target)}: {why}") from None


def plugin_paths(spec: str) -> tuple[str, ...]:
    """Folders to append to ``sys.path`` so a ``package.module:NAME`` plug-in is found.

    ckptbench never puts the current folder *first* on ``sys.path`` (a file there named like
    an installed module must not shadow it), so a plug-in module that lives in the current
    folder and is not importable otherwise is resolved here, explicitly, and the folder is
    appended at the end. Built-ins and file plug-ins need nothing.
    """
    target, sep, _ = spec.rpartition(":")
    if not sep or not target or _is_file_target(target) or registry.is_builtin(spec):
        return ()
    top = target.split(".")[0]
    if not top.isidentifier():
        return ()
    try:
        if importlib.util.find_spec(top) is not None:
            return ()
    except (ImportError, ValueError):
        return ()
    cwd = Path.cwd()
    if os.path.isfile(cwd / f"{top}.py") or os.path.isdir(cwd / top):  # a name too long: no
        return (str(cwd),)
    return ()


def plugin_provenance(spec: str) -> dict[str, str] | None:
    """Where a plug-in's code came from: its file relative to the current folder and the
    SHA-256 of its content (never an absolute path of this machine). None for built-ins."""
    target, sep, _ = spec.rpartition(":")
    if not sep or registry.is_builtin(spec):
        return None
    path = plugin_source_file(spec)
    if path is None:
        return {"module": target}
    digest = source_sha256(path)
    if digest is None:
        return {"path": target}
    return {"path": os.path.relpath(path.resolve(), Path.cwd()), "sha256": digest}


def source_sha256(path: str | os.PathLike[str], limit_bytes: int | None = None) -> str | None:
    """The SHA-256 of a source file's content, read in chunks (never imported); None when
    it cannot be read or is larger than ``limit_bytes``."""
    digest = hashlib.sha256()
    try:
        with open(path, "rb") as f:
            if limit_bytes is not None and os.fstat(f.fileno()).st_size > limit_bytes:
                return None
            for chunk in iter(lambda: f.read(1 << 20), b""):
                digest.update(chunk)
    except OSError:
        return None
    return digest.hexdigest()


def plugin_source_file(spec: str) -> Path | None:
    """The source file of a plug-in ``'path/to/file.py:NAME'`` or ``'package.module:NAME'``
    (found without importing it, :func:`find_module_file`); None for a built-in or a module
    not found."""
    target, sep, _ = spec.rpartition(":")
    if not sep or not target or registry.is_builtin(spec):
        return None
    if _is_file_target(target):
        return Path(target).expanduser()
    return find_module_file(target, plugin_paths(spec))


def find_module_file(name: str, extra_paths: tuple[str, ...] = ()) -> Path | None:
    """The source file of module ``name`` as the import system would find it, without
    executing anything: ``importlib.util.find_spec("pkg.mod")`` imports ``pkg`` (its
    ``__init__`` runs), so each dotted level is looked up here with the finders of
    ``sys.meta_path`` and the search locations of the level above. ``extra_paths`` are
    searched after ``sys.path`` (see :func:`plugin_paths`). None when not found."""
    parts = name.split(".")
    if not parts or not all(part.isidentifier() for part in parts):
        return None
    search: list[str] | None = None  # top level: sys.path (+ extra_paths after it)
    found = None
    for depth in range(len(parts)):
        fullname = ".".join(parts[: depth + 1])
        found = _find_one(fullname, search, extra_paths if depth == 0 else ())
        if found is None:
            return None
        if depth < len(parts) - 1:
            locations = found.submodule_search_locations
            if locations is None:
                return None  # a module, not a package: nothing below it
            search = list(locations)
    if found is None or not found.origin or not Path(found.origin).is_file():
        return None
    return Path(found.origin)


def _find_one(
    fullname: str, search: list[str] | None, extra_paths: tuple[str, ...]
) -> importlib.machinery.ModuleSpec | None:
    """One level of :func:`find_module_file`: ask each meta-path finder, never importing."""
    loaded = sys.modules.get(fullname)
    if loaded is not None and getattr(loaded, "__spec__", None) is not None:
        return loaded.__spec__
    for finder in sys.meta_path:
        find = getattr(finder, "find_spec", None)
        if find is None:
            continue
        try:
            found = find(fullname, search)
        except (ImportError, ValueError, TypeError, AttributeError, OSError):
            found = None
        if found is not None:
            return found
    if search is None and extra_paths:
        try:
            return importlib.machinery.PathFinder.find_spec(fullname, list(extra_paths))
        except (ImportError, ValueError, OSError):
            return None
    return None


def _size_kwargs(factory: Callable[..., Any], sizes: Sizes) -> dict[str, int] | None:
    """The size keyword arguments ``factory`` accepts, or None if it cannot be inspected."""
    try:
        params = inspect.signature(factory).parameters.values()
    except (TypeError, ValueError):
        return None
    available = sizes.as_kwargs()
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params):
        return available
    by_keyword = (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)
    accepted = {p.name for p in params if p.kind in by_keyword}
    return {name: value for name, value in available.items() if name in accepted}


def _call_factory(spec: str, factory: Callable[..., Any], sizes: Sizes) -> Any:
    kwargs = _size_kwargs(factory, sizes)
    if kwargs is None:
        kwargs = {}
    else:
        try:
            inspect.signature(factory).bind(**kwargs)
        except TypeError as err:
            raise WorkloadError(
                f"workload factory {_shown(spec)} cannot be called with only size keywords "
                f"({', '.join(SIZE_FIELDS)}): {error_line(err)}"
            ) from None
    try:
        return factory(**kwargs)
    except Exception as err:
        raise WorkloadError(f"workload factory {_shown(spec)} raised {error_line(err)}") from None
