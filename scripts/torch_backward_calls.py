"""What one reverse call costs torch beyond its kernels: the LSTM step of ckptbench's
workload taped 1000 times and reversed by one ``torch.autograd.backward`` call (the plain
gradient's shape) against the same 1000 steps each taped from detached leaves and reversed
by a call of its own (the shape of Revolve's reverse sweep, without its recomputation),
once from the calling thread and once re-entrant, from inside an autograd Function's
backward, which is where ckptbench's torch executor makes them
(``ckptbench/backends/torch/binding.py``).

Issue 22 on one H200: torch Revolve-31 (hidden 1024 x batch 64, float32) ran at 1.22x its
floor through the CLI, 5 rounds; on the CPU it runs at 0.91-0.99x. On CUDA a backward call
from the calling thread hands the graph to the device's autograd thread and waits; a
re-entrant one runs where it is called but sets up a graph task of its own. This measures
whether those 1000 calls are the difference (docs/gpu.md, "The next GPU run"). Prints one
JSON line; ``--device cpu --hidden 256 --batch 16`` runs it here in seconds.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time

import torch


def _sync(device: str) -> None:
    if device == "cuda":
        torch.cuda.synchronize()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--device", default="cuda", choices=["cpu", "cuda"])
    ap.add_argument("--hidden", type=int, default=1024)
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--steps", type=int, default=1000)
    ap.add_argument("--repeats", type=int, default=5)
    args = ap.parse_args()
    dev, h, b, n = args.device, args.hidden, args.batch, args.steps
    gen = torch.Generator().manual_seed(0)
    w = (torch.randn(4 * h, 32 + h, generator=gen) * 0.05).to(dev).requires_grad_()
    xs = torch.randn(n, b, 32, generator=gen).to(dev)

    def step(wl, hc, x):
        """The LSTM step with weight ``wl``: state (h, c), input x."""
        hh, c = hc
        i, f, g, o = (torch.cat([x, hh], 1) @ wl.T).chunk(4, 1)
        c = torch.sigmoid(f) * c + torch.sigmoid(i) * torch.tanh(g)
        return torch.sigmoid(o) * torch.tanh(c), c

    zero = (torch.zeros(b, h, device=dev), torch.zeros(b, h, device=dev))

    def forward_only():
        with torch.no_grad():
            hc = zero
            for k in range(n):
                hc = step(w, hc, xs[k])

    def one_call():
        hc = zero
        for k in range(n):
            hc = step(w, hc, xs[k])
        torch.autograd.backward(hc[0].sum())

    def reverse_steps(wl):
        """Each step taped from detached leaves and reversed by a call of its own, against
        the weight leaf ``wl``; its gradient. The states each taped step starts from come
        from one untaped sweep first (not timed apart)."""
        with torch.no_grad():
            states = [zero]
            for k in range(n - 1):
                states.append(step(wl, states[-1], xs[k]))
        bar = (torch.ones(b, h, device=dev), torch.zeros(b, h, device=dev))
        for k in reversed(range(n)):
            leaves = [t.detach().requires_grad_() for t in states[k]]
            with torch.enable_grad():
                new = step(wl, leaves, xs[k])
                torch.autograd.backward(list(new), list(bar))
            bar = (leaves[0].grad, leaves[1].grad)
        return wl.grad

    def call_per_step():
        reverse_steps(w)

    class Reentrant(torch.autograd.Function):
        @staticmethod
        def forward(ctx, weight):
            ctx.save_for_backward(weight)
            return weight.sum() * 0

        @staticmethod
        def backward(ctx, _g):
            (weight,) = ctx.saved_tensors
            return reverse_steps(weight.detach().requires_grad_())

    def call_per_step_reentrant():
        torch.autograd.grad(Reentrant.apply(w), [w])

    out = {"device": dev, "hidden": h, "batch": b, "steps": n}
    for name, fn in (
        ("forward_only_s", forward_only),
        ("one_call_s", one_call),
        ("call_per_step_s", call_per_step),
        ("call_per_step_reentrant_s", call_per_step_reentrant),
    ):
        fn()
        _sync(dev)
        times = []
        for _ in range(args.repeats):
            w.grad = None
            t0 = time.perf_counter()
            fn()
            _sync(dev)
            times.append(time.perf_counter() - t0)
        out[name] = statistics.median(times)
    # per_step beyond one_call: the forward-only sweep it adds, then what is left per call
    # the three reverse sweeps give one gradient (else the times compare different work)
    grads = []
    for fn in (one_call, call_per_step):
        w.grad = None
        fn()
        grads.append(w.grad.clone())
    grads.append(torch.autograd.grad(Reentrant.apply(w), [w])[0])
    scale = grads[0].abs().max().item() or 1.0
    out["grad_max_abs"] = scale
    out["max_rel_diff"] = max((g - grads[0]).abs().max().item() for g in grads) / scale
    for how in ("", "_reentrant"):
        extra = out[f"call_per_step{how}_s"] - out["one_call_s"] - out["forward_only_s"]
        out[f"per_call{how}_overhead_us"] = extra / n * 1e6
    print(json.dumps(out))


if __name__ == "__main__":
    main()
