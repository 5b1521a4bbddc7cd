"""The built-in layer chains, written once for every array framework.

* ``mlp-stack`` — dense layers of varying widths (``tanh``; the last one linear): the state
  changes its shape at every layer;
* ``cnn-stack`` — 3x3 convolutions whose feature maps shrink while their channels grow
  (stride 2 spread over the stack), then a head (spatial mean, dense): strongly uneven
  states and tapes. A convolution is ``im2col`` written with slices and one ``einsum``, the
  same ops on every framework;
* ``transformer-stack`` — an embedding (a dense projection of the input features plus a
  learned position table), pre-norm attention and MLP sublayers (``block0.attn``,
  ``block0.mlp``, ``block1.attn``, ...), and a head (norm, mean over the sequence, dense).

Each class names its array namespace ``xp`` (``autograd.numpy`` here; ``torch`` and
``jax.numpy`` in the backends' subclasses, which only override ``xp`` and ``convert``), so the
math is op for op the same, and the initial values are drawn once from numpy's generator
and converted: one seed gives one loss on every backend (to 1e-12 in float64).

Sizes: ``hidden`` is the width (mlp: hidden widths cycle over 3/4, 1, 5/4, 1/2 of it, x_1
first; transformer: the model width) or, divided by 32, the first convolution's channels
(cnn); ``batch`` the batch; ``input`` the input's features (mlp, transformer) or its image
side (cnn, 3 channels); ``output`` the last layer's width. ``layers`` (``--steps``) is the
stack's depth.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, ClassVar

import autograd.numpy as anp
import numpy as np

from ckptbench.workloads.base import WorkloadError, check_positive
from ckptbench.workloads.chain import LayerSpec

__all__ = ["SEQ", "STACKS", "CNNStack", "MLPStack", "Stack", "TransformerStack"]

#: The transformer-stack's sequence length.
SEQ = 8


@dataclass(frozen=True)
class Stack:
    """What the built-in stacks share: sizes, ``init`` (numpy draws, converted), ``layer``
    dispatching on the layer's kind, ``loss = mean(x_L ** 2)``."""

    hidden: int = 256
    batch: int = 16
    input: int = 32
    output: int = 32
    dtype: str = "float64"
    built: dict = field(default_factory=dict, repr=False, compare=False)  # "specs": the last init

    xp: ClassVar[Any] = anp
    NAME: ClassVar[str] = ""
    MIN_LAYERS: ClassVar[int] = 1

    def __post_init__(self) -> None:
        for name in ("hidden", "batch", "input", "output"):
            object.__setattr__(self, name, check_positive(name, getattr(self, name)))

    def convert(self, tree: Any) -> Any:
        """numpy arrays as the framework's arrays (autograd: numpy itself)."""
        return tree

    def specs(self, layers: int) -> tuple[LayerSpec, ...]:
        raise NotImplementedError

    def checked_specs(self, layers: int) -> tuple[LayerSpec, ...]:
        layers = check_positive("layers (--steps)", layers)
        if layers < self.MIN_LAYERS:
            raise WorkloadError(
                f"{self.NAME} needs at least {self.MIN_LAYERS} layers (--steps), got {layers}"
            )
        return self.specs(layers)

    def layer_names(self, layers: int) -> tuple[str, ...]:
        return tuple(s.name for s in self.checked_specs(layers))

    def weights(self, spec: LayerSpec) -> int:
        """The elements of a layer's weight matrices (its ``draw``, biases left out)."""
        raise NotImplementedError

    @classmethod
    def states(cls, sizes: Any, layers: int) -> list[int]:
        """Elements of each layer's input state ``x_i`` (a costs file's ``state_bytes`` are
        these times the dtype's size)."""
        stack = cls(**{k: getattr(sizes, k) for k in ("hidden", "batch", "input", "output")})
        return [math.prod(s.in_shape) for s in stack.checked_specs(layers)]

    @classmethod
    def least(cls, sizes: Any, layers: int) -> int:
        """Array elements of the weights, ``x_0`` and the largest state at ``sizes``: the
        least any mode holds (nothing allocated; ``Case.check_fits_memory``)."""
        stack = cls(**{k: getattr(sizes, k) for k in ("hidden", "batch", "input", "output")})
        specs = stack.checked_specs(layers)
        largest = max(math.prod(s.out_shape) for s in specs)
        return sum(stack.weights(s) for s in specs) + math.prod(specs[0].in_shape) + largest

    def draw(self, spec: LayerSpec, rng: np.random.Generator) -> dict[str, np.ndarray]:
        raise NotImplementedError

    def init(self, layers: int, rng: Any) -> tuple[list[Any], Any]:
        """One parameter dict per layer, then ``x_0`` (N(0, 1)), from numpy's ``rng``."""
        specs = self.checked_specs(layers)
        self.built["specs"] = specs
        rng = np.random.default_rng(rng)
        params = [self.draw(spec, rng) for spec in specs]
        x0 = rng.standard_normal(specs[0].in_shape)
        params, x0 = self.convert((params, x0))
        return list(params), x0

    def layer(self, i: int, params: Any, x: Any) -> Any:
        specs = self.built.get("specs")
        if specs is None:
            raise WorkloadError(f"{self.NAME}: layer() before init()")
        spec = specs[i]
        return getattr(self, spec.kind)(params, x, spec)

    def loss(self, x: Any) -> Any:
        return self.xp.mean(x**2)

    # ------------------------------------------------------------------ shared pieces

    def dense(self, p: Any, x: Any, spec: LayerSpec) -> Any:
        return self.xp.tanh(x @ p["W"] + p["b"])

    def linear(self, p: Any, x: Any, spec: LayerSpec) -> Any:
        return x @ p["W"] + p["b"]

    def norm(self, x: Any, g: Any, b: Any) -> Any:
        xp = self.xp
        mu = xp.mean(x, axis=-1, keepdims=True)
        var = xp.mean((x - mu) ** 2, axis=-1, keepdims=True)
        return (x - mu) / xp.sqrt(var + 1e-5) * g + b


def _dense(rng: np.random.Generator, fan_in: int, fan_out: int) -> dict[str, np.ndarray]:
    return {
        "W": rng.standard_normal((fan_in, fan_out)) / math.sqrt(fan_in),
        "b": 0.1 * rng.standard_normal(fan_out),
    }


@dataclass(frozen=True)
class MLPStack(Stack):
    """Dense ``tanh`` layers ``dense0 .. dense{L-2}`` of varying widths, then ``out``."""

    NAME: ClassVar[str] = "mlp-stack"

    def width(self, i: int, layers: int) -> int:
        if i == 0:
            return self.input
        if i == layers:
            return self.output
        return max(1, self.hidden * (2 + i % 4) // 4)

    def specs(self, layers: int) -> tuple[LayerSpec, ...]:
        out = []
        for i in range(layers):
            last = i == layers - 1
            w_in, w_out = self.width(i, layers), self.width(i + 1, layers)
            out.append(
                LayerSpec(
                    "out" if last else f"dense{i}",
                    "linear" if last else "dense",
                    (self.batch, w_in),
                    (self.batch, w_out),
                )
            )
        return tuple(out)

    def draw(self, spec: LayerSpec, rng: np.random.Generator) -> dict[str, np.ndarray]:
        return _dense(rng, spec.in_shape[-1], spec.out_shape[-1])

    def weights(self, spec: LayerSpec) -> int:
        return spec.in_shape[-1] * spec.out_shape[-1]


@dataclass(frozen=True)
class CNNStack(Stack):
    """3x3 convolutions ``conv0 .. conv{L-2}`` (``tanh``; stride 2 and twice the channels
    at ``min(L - 1, ceil(log2(side)))`` layers spread over the stack), then ``head``."""

    NAME: ClassVar[str] = "cnn-stack"
    CHANNELS_IN: ClassVar[int] = 3

    def specs(self, layers: int) -> tuple[LayerSpec, ...]:
        convs, side = layers - 1, self.input
        downs = min(convs, math.ceil(math.log2(side))) if side > 1 else 0
        base = max(2, self.hidden // 32)
        shape = (self.batch, self.CHANNELS_IN, side, side)
        out, done = [], 0
        for j in range(convs):
            if downs and (j + 1) * downs // convs > j * downs // convs:
                done, side = done + 1, (side + 1) // 2
            new = (self.batch, base * 2**done, side, side)
            out.append(LayerSpec(f"conv{j}", "conv", shape, new))
            shape = new
        out.append(LayerSpec("head", "pool_linear", shape, (self.batch, self.output)))
        return tuple(out)

    def draw(self, spec: LayerSpec, rng: np.random.Generator) -> dict[str, np.ndarray]:
        if spec.kind != "conv":
            return _dense(rng, spec.in_shape[1], spec.out_shape[-1])
        c_in, c_out = spec.in_shape[1], spec.out_shape[1]
        return {
            "W": rng.standard_normal((c_out, c_in, 3, 3)) / math.sqrt(9 * c_in),
            "b": 0.1 * rng.standard_normal((1, c_out, 1, 1)),
        }

    def weights(self, spec: LayerSpec) -> int:
        if spec.kind != "conv":
            return spec.in_shape[1] * spec.out_shape[-1]
        return spec.in_shape[1] * spec.out_shape[1] * 9

    def conv(self, p: Any, x: Any, spec: LayerSpec) -> Any:
        """``tanh(conv3x3(x, W, padding 1, stride s) + b)`` as im2col: nine strided slices
        of the zero-padded input, stacked, contracted with ``W`` in one ``einsum``."""
        xp = self.xp
        s = 2 if spec.out_shape[2] < spec.in_shape[2] else 1
        ho, wo = spec.out_shape[2], spec.out_shape[3]
        zero_rows = x[:, :, :1, :] * 0.0
        x = xp.concatenate([zero_rows, x, zero_rows], axis=2)
        zero_cols = x[:, :, :, :1] * 0.0
        x = xp.concatenate([zero_cols, x, zero_cols], axis=3)
        patches = xp.stack(
            [
                x[:, :, di : di + s * (ho - 1) + 1 : s, dj : dj + s * (wo - 1) + 1 : s]
                for di in range(3)
                for dj in range(3)
            ],
            axis=2,
        )
        w = p["W"].reshape((spec.out_shape[1], spec.in_shape[1], 9))
        return xp.tanh(xp.einsum("bckhw,ock->bohw", patches, w) + p["b"])

    def pool_linear(self, p: Any, x: Any, spec: LayerSpec) -> Any:
        return self.xp.mean(x, axis=(2, 3)) @ p["W"] + p["b"]


@dataclass(frozen=True)
class TransformerStack(Stack):
    """``embed``, then pre-norm sublayers ``block{k}.attn`` and ``block{k}.mlp`` alternating
    (residual), then ``head``; sequences of :data:`SEQ` tokens, width ``hidden``."""

    NAME: ClassVar[str] = "transformer-stack"
    MIN_LAYERS: ClassVar[int] = 2

    @property
    def heads(self) -> int:
        return next(h for h in (4, 2, 1) if self.hidden % h == 0)

    def specs(self, layers: int) -> tuple[LayerSpec, ...]:
        b, d = self.batch, self.hidden
        tokens = (b, SEQ, d)
        out = [LayerSpec("embed", "embed", (b, SEQ, self.input), tokens)]
        for i in range(layers - 2):
            part = "attn" if i % 2 == 0 else "mlp"
            out.append(LayerSpec(f"block{i // 2}.{part}", part, tokens, tokens))
        out.append(LayerSpec("head", "head", tokens, (b, self.output)))
        return tuple(out)

    def draw(self, spec: LayerSpec, rng: np.random.Generator) -> dict[str, np.ndarray]:
        d = self.hidden
        if spec.kind == "embed":
            return {**_dense(rng, self.input, d), "pos": 0.1 * rng.standard_normal((SEQ, d))}
        norm = {"g": 1.0 + 0.1 * rng.standard_normal(d), "beta": 0.1 * rng.standard_normal(d)}
        if spec.kind == "attn":
            mats = {k: _dense(rng, d, d)["W"] for k in ("Wq", "Wk", "Wv", "Wo")}
            return {**norm, **mats}
        if spec.kind == "mlp":
            up, down = _dense(rng, d, 2 * d), _dense(rng, 2 * d, d)
            return {**norm, "W1": up["W"], "b1": up["b"], "W2": down["W"], "b2": down["b"]}
        return {**norm, **_dense(rng, d, self.output)}

    def weights(self, spec: LayerSpec) -> int:
        d = self.hidden
        if spec.kind == "embed":
            return self.input * d + SEQ * d
        if spec.kind in ("attn", "mlp"):
            return 4 * d * d  # Wq, Wk, Wv, Wo; or d -> 2d -> d
        return d * self.output

    def embed(self, p: Any, x: Any, spec: LayerSpec) -> Any:
        return x @ p["W"] + p["b"] + p["pos"]

    def attn(self, p: Any, x: Any, spec: LayerSpec) -> Any:
        xp, (b, t, d), h = self.xp, spec.in_shape, self.heads
        u = self.norm(x, p["g"], p["beta"])
        q, k, v = ((u @ p[w]).reshape((b, t, h, d // h)) for w in ("Wq", "Wk", "Wv"))
        e = xp.exp(xp.einsum("bthd,bshd->bhts", q, k) / math.sqrt(d // h))
        a = e / xp.sum(e, axis=-1, keepdims=True)
        return x + xp.einsum("bhts,bshd->bthd", a, v).reshape((b, t, d)) @ p["Wo"]

    def mlp(self, p: Any, x: Any, spec: LayerSpec) -> Any:
        u = self.norm(x, p["g"], p["beta"])
        return x + self.xp.tanh(u @ p["W1"] + p["b1"]) @ p["W2"] + p["b2"]

    def head(self, p: Any, x: Any, spec: LayerSpec) -> Any:
        u = self.norm(x, p["g"], p["beta"])
        return self.xp.mean(u, axis=1) @ p["W"] + p["b"]


#: The built-in stacks by name (autograd's; torch and JAX subclass each).
STACKS: dict[str, type[Stack]] = {cls.NAME: cls for cls in (MLPStack, CNNStack, TransformerStack)}
