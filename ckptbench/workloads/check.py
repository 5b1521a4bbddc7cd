"""The plug-in check: a plug-in's protocol run once, in the disposable worker, before any mode.

:func:`check_workload` loads the plug-in through the case's backend (its own loader and
adapter, as a measured mode does), then calls ``init``, one ``step``, ``post`` and ``loss``
and differentiates that one-step loss with the backend's framework. Shape, dtype, arity and
backend mistakes come back as one line saying what was expected, what came and, when the
plug-in's own code raised, where (``file.py:LINE``, relative to the current folder); a
plug-in that computes with another framework is told which ``--backend`` to use. It also
resolves the sizes: a size the user did not give comes from the factory's own default
(``make(hidden=64)``), and notes such as frozen torch parameters are returned for the CLI
to print.

Which framework a value or a plug-in's module belongs to is
:mod:`ckptbench.workloads.frameworks`; where the plug-in's own code raised,
:mod:`ckptbench.workloads.tracebacks`.

Only ever run in a disposable worker (``ckptbench.measure.worker``, task ``check``): it executes the
plug-in.
"""

from __future__ import annotations

import dataclasses
import importlib
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

import numpy as np

from ckptbench.workloads import (
    BUILTIN_WORKLOADS,
    Sizes,
    WorkloadError,
    factories_cached,
    factory_size_defaults,
)
from ckptbench.workloads.base import defined_at, float_dtype
from ckptbench.workloads.chain import is_chain, layer_names
from ckptbench.workloads.frameworks import (
    ARRAYS,
    WRITTEN_WITH,
    framework_of,
    frameworks_imported,
    frameworks_in,
    leaves,
    wrong_backend,
)
from ckptbench.workloads.tracebacks import error_line, where

if TYPE_CHECKING:
    from ckptbench.results.schema import Case

__all__ = ["PluginCheck", "PluginProblem", "check_workload"]


class PluginProblem(WorkloadError):
    """The plug-in does not follow the protocol; the message is one line."""


def check_workload(case: Case, given_sizes: Iterable[str] | None = None) -> dict[str, Any]:
    """Run ``case``'s plug-in once on its backend (module doc).

    ``given_sizes``: the size options the user set (None: all of them); the others take the
    factory's own defaults. Returns ``{"sizes": {...}, "notes": [...], "problem": str|None,
    "chain": bool, "state_bytes": [int, ...]|None}``; ``problem`` is one line when the
    plug-in cannot be measured, ``chain`` whether it is a layer chain, ``state_bytes`` the
    bytes of the state each step starts from, as the plug-in really makes them at these
    sizes (what a ``--costs`` file's ``state_bytes`` is checked against; None where a leaf
    has no ``nbytes``), ``dtypes`` each floating dtype of its parameters and states (every
    layer's output on a chain) with where it was first seen (``{"float32": "init's
    params"}``: what ``measure.tasks`` records or refuses), ``output_dtype`` and
    ``loss_dtype`` the floating dtype of what ``loss`` gets (post's output, a chain's last
    layer's) and of the loss (None where it has none): recorded, never refused.
    """
    sizes = case.sizes()
    notes: list[str] = []
    if case.model.strip() in BUILTIN_WORKLOADS:
        return {"sizes": sizes, "notes": notes, "problem": None}
    with factories_cached():
        try:
            defaults = factory_size_defaults(case.model)
        except WorkloadError as err:
            return {"sizes": sizes, "notes": notes, "problem": str(err), "loading": True}
        given = set(sizes) if given_sizes is None else set(given_sizes)
        sizes.update({k: v for k, v in defaults.items() if k not in given})
        case = dataclasses.replace(case, **sizes)
        ops = _plugin_check(case.backend)
        try:
            Sizes(**sizes)
            ops.run(case, notes)
        except PluginProblem as err:
            return {"sizes": sizes, "notes": notes, "problem": str(err)}
        except WorkloadError as err:
            return {"sizes": sizes, "notes": notes, "problem": str(err)}
    return {"sizes": sizes, "notes": notes, "problem": None, "chain": ops.chain,
            "state_bytes": ops.state_bytes, "dtypes": ops.dtypes,
            "output_dtype": ops.output_dtype, "loss_dtype": ops.loss_dtype}  # fmt: skip


def _plugin_check(backend: str) -> PluginCheck:
    """The backend's :class:`PluginCheck` (its spec's ``plugin_check``: ``module:Class``)."""
    from ckptbench.backends.registry import spec

    module, _, name = spec(backend).plugin_check.partition(":")
    return getattr(importlib.import_module(module), name)()


# --------------------------------------------------------------------------- the protocol


class PluginCheck:
    """One backend's side of the check: each backend's folder subclasses it in its
    ``plugincheck`` module, named by ``BackendSpec.plugin_check``."""

    name = "autograd"

    def load(self, case: Case) -> tuple[Any, Any, Any, Any, Any]:
        """``(user's workload, adapter, params, state0, inputs)``."""
        raise NotImplementedError

    def stack(self, ys: list[Any]) -> Any:
        raise NotImplementedError

    def value_and_grad(self, f: Callable[[Any], Any], params: Any) -> tuple[Any, Any]:
        raise NotImplementedError

    def param_leaves(self, params: Any) -> list[Any]:
        return leaves(params)

    def describe(self, x: Any) -> str:
        shape = getattr(x, "shape", None)
        dtype = getattr(x, "dtype", None)
        if shape is None or dtype is None:
            return type(x).__name__
        return f"array{list(shape)} {str(dtype).replace('torch.', '')}"

    # ------------------------------------------------------------------ the run

    chain = False  # whether the plug-in is a layer chain (known once it is loaded)
    state_bytes: list[int] | None = None  # the state each step starts from, in bytes
    output_dtype: str | None = None  # what loss gets: post's output, a chain's last layer's
    loss_dtype: str | None = None  # the loss's (float32 under bfloat16 steps, say)

    def nbytes(self, tree: Any) -> int | None:
        """The bytes of a state's arrays (None when a leaf does not say)."""
        sizes = [getattr(x, "nbytes", None) for x in leaves(tree)]
        ok = all(isinstance(n, int | np.integer) for n in sizes)
        return int(sum(sizes)) if ok else None

    def run(self, case: Case, notes: list[str]) -> None:
        self.case = case
        self.user: Any = None
        self.dtypes: dict[str, str] = {}  # each floating dtype: where it was first seen
        try:
            self.user, wl, params, state0, inputs = self.load(case)
        except PluginProblem:
            raise
        except WorkloadError as err:
            raise PluginProblem(self._with_hint(str(err))) from None
        except Exception as err:
            raise self._failed("init", err, getattr(self.user, "init", None)) from None
        notes.extend(getattr(wl, "notes", ()) or ())
        if is_chain(wl):
            self.chain = True
            return self._run_chain(case, wl, params, state0, notes)
        if not self.param_leaves(params):
            raise PluginProblem(
                "params holds no arrays: there is nothing to differentiate (init returns "
                "(params, state0, inputs); params are what the gradient is taken of)"
            )
        try:
            n = len(inputs)
        except TypeError:
            n = None
        if n is None or n < case.steps:
            got = f"{n} entries" if n is not None else f"a {type(inputs).__name__}"
            raise PluginProblem(
                f"init's inputs must hold one input per step on their leading axis: --steps "
                f"{case.steps} needs {case.steps}, got {got}{self.at(self.user.init)}"
            )
        x0 = inputs[0]
        self._finite("init's params", params, self.user.init)
        self._finite("init's state0", state0, self.user.init)
        self._finite("init's first input", x0, self.user.init)
        self._seen("init's params", self.param_leaves(params))
        self._seen("init's state0", leaves(state0))  # every state's: a step keeps dtypes
        s1 = self._call("step", wl.step, params, state0, x0)
        self._same_kind("step", s1)
        self._same_state(state0, s1)
        start = self.nbytes(state0)  # every step's: a step keeps its state's shapes
        self.state_bytes = None if start is None else [start] * case.steps
        self._finite("the state after one step", s1, self.user.step)
        y = self._call("post", wl.post, params, s1)
        if isinstance(y, dict | tuple | list) or framework_of(y) is None:
            raise PluginProblem(
                f"post must return one array (the step's output; loss gets them stacked on a "
                f"leading steps axis), got {type(y).__name__}{self.at(self.user.post)}"
            )
        self._same_kind("post", y)
        loss = self._call("loss", wl.loss, self.stack([y]))
        size = int(np.prod(getattr(loss, "shape", ()) or ()))
        if size != 1 or isinstance(loss, dict | tuple | list):
            got = self.describe(loss) if hasattr(loss, "shape") else type(loss).__name__
            raise PluginProblem(f"loss must return a scalar, got {got}{self.at(self.user.loss)}")
        self._finite("the loss of one step", loss, self.user.loss)
        self.output_dtype, self.loss_dtype = float_dtype(y), float_dtype(loss)

        def one_step(p: Any) -> Any:
            return wl.loss(self.stack([wl.post(p, wl.step(p, state0, x0))]))

        self._gradient("the gradient of one step", one_step, params)

    def _run_chain(self, case: Case, wl: Any, params: Any, x0: Any, notes: list[str]) -> None:
        """A layer chain: its layer names, every layer once, the loss a scalar, and their
        gradient with respect to what the modes differentiate: every layer's parameters
        and x_0."""
        self._layer_names(wl, case.steps)

        def forward(p: Any, x: Any) -> Any:
            for i in range(case.steps):
                x = self._call("layer", wl.layer, i, p[i], x)
            return x

        self._finite("init's params", params, self.user.init)
        self._finite("init's x0", x0, self.user.init)
        self._seen("init's params", self.param_leaves(params))
        self._seen("init's x0", leaves(x0))
        x, starts = x0, []  # each layer's input bytes: the states a plan keeps
        for i in range(case.steps):  # once eagerly: the first layer whose output is not finite
            starts.append(self.nbytes(x))
            x = self._call("layer", wl.layer, i, params[i], x)
            self._finite(f"layer {i}'s output", x, self.user.layer)
            self._seen(f"layer {i}'s output", leaves(x))
        known = [n for n in starts if n is not None]
        self.state_bytes = known if len(known) == len(starts) else None
        self._same_kind("layer", x)
        loss = self._call("loss", wl.loss, x)
        if int(np.prod(getattr(loss, "shape", ()) or ())) != 1:
            raise PluginProblem(f"loss must return a scalar{self.at(self.user.loss)}")
        self._finite("the loss of the chain", loss, self.user.loss)
        self.output_dtype, self.loss_dtype = float_dtype(x), float_dtype(loss)
        if not self.param_leaves(params):
            notes.append("no layer has parameters: the gradient measured is that of x_0 only")
        self._gradient(
            "the gradient of the chain",
            lambda p: wl.loss(forward(p["layers"], p["input"])),
            {"input": x0, "layers": params},
        )

    def _layer_names(self, wl: Any, layers: int) -> None:
        """The chain's ``layer_names`` (the per-layer tables' keys), as the modes and the
        step costs take them: a wrong count or an unprintable name is the plug-in's
        problem, found here before anything is measured."""
        own = getattr(self.user, "layer_names", None)
        try:
            layer_names(wl, layers)
        except WorkloadError as err:
            raise PluginProblem(f"{err}{self.at(own)}") from None
        except Exception as err:
            raise self._failed("layer_names", err, own) from None

    # ------------------------------------------------------------------ helpers

    def _seen(self, what: str, found: list[Any]) -> None:
        for name in filter(None, map(float_dtype, found)):
            self.dtypes.setdefault(name, what)

    def _gradient(self, what: str, f: Callable[[Any], Any], params: Any) -> None:
        """``f``'s gradient at ``params`` (as a mode takes it), which must be finite."""
        try:
            _, grads = self.value_and_grad(f, params)
        except PluginProblem:
            raise
        except Exception as err:
            raise self._failed(what, err, None) from None
        self._finite(what, grads, None)

    def nonfinite(self, leaf: Any) -> tuple[int, int, Any] | None:
        """``(entries not finite, entries, the first of them or None)`` of one leaf; None
        when it holds no numbers (an unused parameter's gradient). A backend counts its own
        arrays where they are (no copy of a model's parameters to the host)."""
        try:
            arr = np.asarray(leaf)
            if arr.dtype.kind not in "biufc":  # bfloat16 (ml_dtypes), or not numbers
                arr = arr.astype(np.float64)
            ok = np.isfinite(arr)
        except (TypeError, ValueError):
            return None
        bad = int(ok.size - np.count_nonzero(ok))
        return bad, int(ok.size), arr.ravel()[~ok.ravel()][0] if bad else None

    def _finite(self, what: str, value: Any, fn: Any) -> None:
        """A PluginProblem naming ``what`` when it holds NaN or inf at this, its first
        evaluation: no mode could measure a gradient of it that is worth checking (the
        checkpointed gradient is checked against the plain one, which NaN never equals)."""
        bad, total, first = 0, 0, None
        for found in filter(None, map(self.nonfinite, leaves(value))):
            bad, total = bad + found[0], total + found[1]
            first = found[2] if first is None else first
        if bad:
            got = f"{first}" if total == 1 else f"{bad} of {total} entries nan or inf"
            raise PluginProblem(
                f"{what} is not finite ({got}) at its first evaluation{self.at(fn)}: no "
                "gradient of it can be measured, nor checked against the plain one"
            )

    def _own_files(self) -> list[str]:
        files = []
        for name in ("init", "step", "post", "loss", "layer", "layer_names"):
            code = getattr(getattr(getattr(self.user, name, None), "__func__", None),
                           "__code__", None)  # fmt: skip
            if code is not None:
                files.append(code.co_filename)
        return files

    def at(self, fn: Any) -> str:
        place = defined_at(fn)
        return f" ({place})" if place else ""

    def _with_hint(self, message: str) -> str:
        uses = frameworks_imported(self.user) if self.user is not None else set()
        if self.name not in uses and len(uses) == 1 and "--backend" not in message:
            (other,) = uses
            return f"{message} (this plug-in uses {other}: use --backend {other})"
        return message

    def _failed(self, what: str, err: BaseException, fn: Any) -> PluginProblem:
        if isinstance(err, WorkloadError) and not isinstance(err, PluginProblem):
            return PluginProblem(self._with_hint(f"{what}: {err}"))
        place = where(err, self._own_files())
        at = f" at {place}" if place else self.at(fn)
        return PluginProblem(self._with_hint(f"{what} raised{at}: {error_line(err)}"))

    def _call(self, what: str, fn: Callable[..., Any], *args: Any) -> Any:
        try:
            return fn(*args)
        except Exception as err:
            raise self._failed(what, err, getattr(self.user, what, None)) from None

    def _same_kind(self, what: str, value: Any) -> None:
        kinds = frameworks_in(value)
        if not kinds or kinds == {self.name}:
            return
        other = sorted(kinds - {self.name})[0]
        written = WRITTEN_WITH.get(other)
        if written is not None:
            raise PluginProblem(
                f"{what} returned {ARRAYS[other]}, not {ARRAYS[self.name]}: a plug-in written "
                f"with {written} runs with --backend {other}"
                f"{self.at(getattr(self.user, what, None))}"
            )
        raise PluginProblem(wrong_backend(other, self.name))

    def _same_state(self, before: Any, after: Any) -> None:
        a, b = leaves(before), leaves(after)

        def sig(leaves: list[Any]) -> list[tuple]:
            return [(tuple(getattr(x, "shape", ())), str(getattr(x, "dtype", type(x))))
                    for x in leaves]  # fmt: skip

        if len(a) != len(b) or sig(a) != sig(b):
            self._same_dtype(a, b)
            want = ", ".join(self.describe(x) for x in a)
            got = ", ".join(self.describe(x) for x in b)
            raise PluginProblem(
                f"step must return a state like the one it got: expected ({want}), got "
                f"({got}){self.at(self.user.step)}"
            )

    def _same_dtype(self, before: list[Any], after: list[Any]) -> None:
        """A step that keeps its state's shapes but not its dtype, said as the refusals of
        ``measure.tasks`` say a dtype (in and out): on torch and JAX ``--dtype`` cast
        ``init``'s arrays; on autograd a state's dtype is the plug-in's own."""
        shapes = [tuple(getattr(x, "shape", ())) for x in before]
        if len(before) != len(after) or shapes != [tuple(getattr(x, "shape", ())) for x in after]:
            return
        pairs = [(float_dtype(x), float_dtype(y)) for x, y in zip(before, after, strict=True)]
        moved = {(a, b) for a, b in pairs if a != b}
        if not moved or any(a is None or b is None for a, b in moved):
            return  # not only floating dtypes: said with the shapes
        ins, outs = (", ".join(sorted({str(pair[k]) for pair in moved})) for k in (0, 1))
        from ckptbench.backends.registry import spec

        said = f"step returned its state in {outs} from one in {ins}"
        if spec(self.name).plugins_own_dtype:
            why = (f"{said}: a step keeps its state's dtype (on --backend {self.name} nothing "
                   "casts a plug-in's arrays: make the new state in the dtype of the one it "
                   "got)")  # fmt: skip
        else:
            why = (f"{said}, not the --dtype {self.case.dtype} asked: ckptbench casts init's "
                   "arrays to --dtype, and the plug-in's own arrays must keep to it (make "
                   "them in x.dtype)")  # fmt: skip
        raise PluginProblem(f"{why}{self.at(self.user.step)}")
