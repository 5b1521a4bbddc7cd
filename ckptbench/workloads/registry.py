"""The one registry of built-in workloads, for every backend.

A built-in workload is declared once, by name, in :data:`WORKLOADS`: one
:class:`BuiltinWorkload` entry saying, per backend, where its implementation lives as a
``"module:attribute"`` string. Nothing is imported when the registry is: a backend's
implementation module is imported only when that backend builds the workload
(:meth:`BuiltinWorkload.factory`), so a worker imports only what its own backend needs
(an autograd worker never imports torch or JAX).

What lists or loads built-ins reads this registry: ``BUILTIN_WORKLOADS`` and
:func:`ckptbench.workloads.load_workload` (the numpy implementation, :data:`NUMPY`) and the
torch and JAX loaders (their own backend's implementation); :func:`model_help` is the
``--model`` help text made from it.

Adding a built-in (for example a GRU):

1. write its implementation for each backend that runs it: a factory taking the sizes as
   keywords (``hidden``, ``batch``, ``input``, ``output``; the torch one also ``device``
   and ``dtype``, the JAX one ``dtype``) and returning a workload (``init``, ``step``,
   ``post``, ``loss``; see :mod:`ckptbench.workloads.base`);
2. add one entry to :data:`_DECLARED` below, naming those implementations by backend::

       BuiltinWorkload(
           "gru",
           "a gated recurrent unit",
           {
               "autograd": "ckptbench.workloads.gru:gru",
               "torch": "ckptbench.backends.torch.workloads:TorchGRU",
               "jax": "ckptbench.backends.jax.workloads:JaxGRU",
           },
       ),

   A stack of differing layers is declared the same way with ``chain=True`` and its
   ``min_steps`` (the three stacks below).

``tests/test_workload_registry.py`` then checks that the name resolves on every backend the entry
names, and that importing this registry imports no framework. A backend left out of the
entry refuses the name in one line. Code outside the package (a test's toy) calls
:func:`register`.
"""

from __future__ import annotations

import difflib
import importlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from ckptbench.results.files import SHOWN_PATH_CHARS, shown_value
from ckptbench.workloads.base import WorkloadError

__all__ = [
    "NUMPY",
    "PLUGIN_FORMS",
    "WORKLOADS",
    "BuiltinWorkload",
    "builtin",
    "factory",
    "is_builtin",
    "model_help",
    "model_text",
    "name_problem",
    "names",
    "register",
]

#: The backend whose implementation is the numpy one (:func:`ckptbench.workloads.load_workload`
#: builds it; torch and JAX draw their initial values from it).
NUMPY = "autograd"


@dataclass(frozen=True)
class BuiltinWorkload:
    """One built-in workload: its name, a phrase for help texts, and per backend name the
    ``"module:attribute"`` of its factory (imported only by :meth:`factory`)."""

    name: str
    summary: str
    implementations: Mapping[str, str] = field(default_factory=dict)
    chain: bool = False  # a layer chain (workloads.chain), not a recurrence
    min_steps: int = 1  # fewest steps (layers) it is built with (a stack's MIN_LAYERS)
    #: ``"module:attribute"`` of ``least(sizes, steps) -> int``: the fewest array elements
    #: its parameters, inputs and one state hold, from the sizes alone (nothing allocated)
    least: str = ""
    #: ``"module:attribute"`` of ``states(sizes, steps) -> int | list[int]``: the elements
    #: of the state each step is handed (one number for every step, or one per layer)
    states: str = ""

    def __post_init__(self) -> None:
        for backend, target in self.implementations.items():
            module, sep, attribute = target.partition(":")
            if not (sep and module and attribute):
                raise ValueError(
                    f"workload {self.name!r}: {backend} implementation {target!r} is not "
                    "'module:attribute'"
                )
        object.__setattr__(self, "implementations", MappingProxyType(dict(self.implementations)))

    def backends(self) -> tuple[str, ...]:
        """The backends that implement this workload."""
        return tuple(self.implementations)

    def least_elements(self, sizes: Any, steps: int) -> int | None:
        """The fewest array elements a run of it holds (``least``); None when undeclared."""
        return int(_resolve(self.least)(sizes, steps)) if self.least else None

    def state_elements(self, sizes: Any, steps: int) -> int | list[int] | None:
        """The elements of each step's input state (``states``); None when undeclared."""
        return _resolve(self.states)(sizes, steps) if self.states else None

    def factory(self, backend: str) -> Callable[..., Any]:
        """The factory of ``backend``'s implementation (imports its module now); a one-line
        :class:`WorkloadError` where ``backend`` has none."""
        target = self.implementations.get(backend)
        if target is None:
            raise WorkloadError(
                f"workload {self.name!r} has no {backend} implementation "
                f"(it runs on {', '.join(self.backends())})"
            )
        return _resolve(target)


def _resolve(target: str) -> Any:
    """The object at ``"module:attribute"`` (dots in the attribute allowed)."""
    module, _, attribute = target.partition(":")
    obj: Any = importlib.import_module(module)
    for part in attribute.split("."):
        obj = getattr(obj, part)
    return obj


#: The built-ins, one entry each (see the module docstring: adding one is one entry here).
_DECLARED = (
    BuiltinWorkload(
        "lstm",
        "an LSTM",
        {
            "autograd": "ckptbench.workloads.lstm:lstm",
            "torch": "ckptbench.backends.torch.workloads:TorchLSTM",
            "jax": "ckptbench.backends.jax.workloads:JaxLSTM",
        },
        least="ckptbench.workloads.lstm:least_elements",
        states="ckptbench.workloads.lstm:state_elements",
    ),
    *(
        BuiltinWorkload(
            name,
            summary,
            {
                "autograd": f"ckptbench.workloads.stacks:{cls}",
                "torch": f"ckptbench.backends.torch.layers:Torch{cls}",
                "jax": f"ckptbench.backends.jax.layers:Jax{cls}",
            },
            chain=True,
            min_steps=min_steps,
            least=f"ckptbench.workloads.stacks:{cls}.least",
            states=f"ckptbench.workloads.stacks:{cls}.states",
        )
        for name, summary, cls, min_steps in (
            ("mlp-stack", "a stack of dense layers of varying widths", "MLPStack", 1),
            ("cnn-stack", "a stack of convolutions, feature maps shrinking", "CNNStack", 1),
            (
                "transformer-stack",
                "an embedding, attention and MLP blocks, a head",
                "TransformerStack",
                2,  # an embedding and a head
            ),
        )
    ),
    BuiltinWorkload(
        "rnn",
        "an Elman RNN",
        {
            "autograd": "ckptbench.workloads.rnn:rnn",
            "torch": "ckptbench.backends.torch.workloads:TorchRNN",
            "jax": "ckptbench.backends.jax.workloads:JaxRNN",
        },
        least="ckptbench.workloads.rnn:least_elements",
        states="ckptbench.workloads.rnn:state_elements",
    ),
)

#: Every built-in workload by name, in registration order.
WORKLOADS: dict[str, BuiltinWorkload] = {}


def register(entry: BuiltinWorkload) -> BuiltinWorkload:
    """Add ``entry`` to :data:`WORKLOADS` (a name registers once)."""
    if entry.name in WORKLOADS and WORKLOADS[entry.name] != entry:
        raise ValueError(f"workload {entry.name!r} is already registered")
    if ":" in entry.name or entry.name != entry.name.strip() or not entry.name:
        raise ValueError(f"workload name {entry.name!r} would read as a plug-in spec")
    WORKLOADS[entry.name] = entry
    return entry


def builtin(name: Any) -> BuiltinWorkload | None:
    """The registered built-in called ``name`` (surrounding blanks ignored), else None."""
    return WORKLOADS.get(name.strip()) if isinstance(name, str) else None


def is_builtin(name: Any) -> bool:
    return builtin(name) is not None


def names(backend: str | None = None) -> tuple[str, ...]:
    """The built-in names, sorted (only those ``backend`` implements)."""
    return tuple(
        sorted(n for n, e in WORKLOADS.items() if backend is None or backend in e.implementations)
    )


#: The two ways a plug-in is named (``--model``, a config's ``model``).
PLUGIN_FORMS = "'path/to/file.py:NAME' or 'package.module:NAME'"


def name_problem(spec: str) -> str | None:
    """Why ``spec`` names no workload, known without loading anything: neither a built-in
    nor a plug-in (``path/to/file.py:NAME``, ``package.module:NAME``); None otherwise (a
    plug-in is checked when it is loaded)."""
    spec = spec.strip()
    if is_builtin(spec) or ":" in spec:
        return None
    if spec.endswith(".py"):
        file = spec if spec == model_text(spec) else "FILE.py"  # a long name is not repeated
        said = "" if file == spec else f"{model_text(spec)}: "
        return (
            f"{said}a plug-in file names its factory after a colon: {file}:NAME (e.g. "
            f"{file}:make; docs/plugins.md)"
        )
    near = difflib.get_close_matches(spec.lower(), names(), n=1)
    return (
        f"unknown workload {shown_value(spec)}{f' (did you mean {near[0]}?)' if near else ''}: "
        f"expected one of {', '.join(names())} or a plug-in {PLUGIN_FORMS}"
    )


def model_text(spec: str) -> str:
    """``spec`` as an error names it after ``--model``: as typed, or quoted and cut where it
    is very long or not one printable line (:func:`ckptbench.results.files.shown_value`, at
    a path's length: a plug-in's file name shows)."""
    text = str(spec).strip()
    short = len(text) <= SHOWN_PATH_CHARS and text.isprintable()
    return text if short else shown_value(text, SHOWN_PATH_CHARS)


def factory(name: str, backend: str) -> Callable[..., Any]:
    """The factory of built-in ``name`` on ``backend`` (a one-line :class:`WorkloadError`
    for an unknown name or a backend without an implementation)."""
    entry = builtin(name)
    if entry is None:
        raise WorkloadError(
            f"unknown workload {shown_value(name)}: expected one of {', '.join(names())}"
        )
    return entry.factory(backend)


def model_help() -> str:
    """The ``--model`` help: the built-ins, then the plug-in forms."""
    return f"{', '.join(names())}, or your own: a plug-in {PLUGIN_FORMS} (docs/plugins.md)."


for _entry in _DECLARED:
    register(_entry)
