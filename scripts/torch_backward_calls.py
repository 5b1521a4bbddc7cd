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
whether those 1000 calls are the difference, and what
the other shape would cost: one backward call in which saved-tensor hooks re-run each step
as the reverse sweep reaches it (``one_call_recomputing``, the shape of torch's
non-reentrant ``torch.utils.checkpoint``). Prints one JSON line (``max_rel_diff`` checks
that every sweep computes one gradient); ``--device cpu --hidden 256 --batch 16`` runs it
here in seconds. Run 8 (docs/gpu.md, "Run 8's questions"): 40 µs a re-entrant call on the
H200, 514 µs from the calling thread; not the difference.
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

    def taped_forward():
        with torch.enable_grad():
            hc = zero
            for k in range(n):
                hc = step(w, hc, xs[k])
        return hc

    def one_call_recomputing():
        """The other shape a Revolve executor can take (torch.utils.checkpoint's
        non-reentrant one): every step taped once with its saved tensors dropped (the pack
        hook keeps a token), then ONE backward call in which the first unpack of a step's
        tensor re-runs that step from its input state under a pack hook that keeps what it
        saves, detached (kept attached to the recomputation's graph, the backward took
        0.23 s more at hidden 256 on the CPU). States are all kept here (Revolve would
        restore and advance instead), so what is left over ``one_call`` and one taped
        forward is the hooks' own cost."""
        states: list[tuple[torch.Tensor, ...]] = []
        grads_in: list[tuple[bool, ...]] = []
        live: dict[int, list[torch.Tensor]] = {}

        def unpack(token):
            k, j = token
            if k not in live:
                live.clear()  # the later step's tensors are no longer needed
                kept: list[torch.Tensor] = []
                leaves = [
                    t.requires_grad_(g)
                    for t, g in zip([t.detach() for t in states[k]], grads_in[k], strict=True)
                ]
                with (
                    torch.enable_grad(),
                    torch.autograd.graph.saved_tensors_hooks(
                        lambda t: kept.append(t.detach()) or len(kept) - 1, lambda i: kept[i]
                    ),
                ):
                    step(w, leaves, xs[k])
                live[k] = kept
            return live[k][j]

        hc = zero
        for k in range(n):
            states.append(tuple(t.detach() for t in hc))
            grads_in.append(tuple(t.requires_grad for t in hc))
            tokens = iter(range(1 << 30))
            with torch.autograd.graph.saved_tensors_hooks(
                lambda _t, k=k, tokens=tokens: (k, next(tokens)), unpack
            ):
                hc = step(w, hc, xs[k])
        torch.autograd.backward(hc[0].sum())

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
        ("taped_forward_s", taped_forward),
        ("one_call_recomputing_s", one_call_recomputing),
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
    # the four reverse sweeps give one gradient (else the times compare different work)
    grads = []
    for fn in (one_call, call_per_step, one_call_recomputing):
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
    extra = out["one_call_recomputing_s"] - out["one_call_s"] - out["taped_forward_s"]
    out["per_step_recomputing_overhead_us"] = extra / n * 1e6
    print(json.dumps(out))


if __name__ == "__main__":
    main()
