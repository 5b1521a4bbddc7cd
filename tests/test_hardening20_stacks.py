"""A truth audit of the layer stacks (hardening 20): what `run` says of a stack peer's
setting must be what the peer does.

``torch.utils.checkpoint.checkpoint_sequential(fns, k, x)`` checkpoints ``k - 1`` segments
and runs the last one without checkpointing, so with one segment it checkpoints nothing:
its gradient is the plain one (``L`` layer calls, as the normal mode's). A case set so is
told, instead of reading as a checkpointed run.
"""

from __future__ import annotations

import pytest

from ckptbench.results.schema import Case

TINY = {"hidden": 8, "batch": 2, "input": 8, "output": 3}


def _sequential(snaps: int, steps: int = 6) -> Case:
    return Case(model="mlp-stack", backend="torch", strategy="checkpoint-sequential",
                steps=steps, snaps=snaps, **TINY)  # fmt: skip


def test_checkpoint_sequential_with_one_segment_says_it_checkpoints_nothing():
    case, notes = _sequential(1).effective()
    assert case.snaps == 1
    said = [n for n in notes if "checkpoints nothing" in n]
    assert len(said) == 1 and "plain gradient" in said[0]


def test_checkpoint_sequential_on_one_layer_says_so_after_the_clamp():
    case, notes = _sequential(4, steps=1).effective()
    assert case.snaps == 1
    assert any("clamped" in n for n in notes)
    assert any("checkpoints nothing" in n for n in notes)


@pytest.mark.parametrize("snaps", [2, 3, 6])
def test_checkpoint_sequential_with_segments_to_checkpoint_says_nothing_more(snaps):
    _, notes = _sequential(snaps).effective()
    assert not any("checkpoints nothing" in n for n in notes)


def test_other_strategies_are_not_told_it():
    for strategy, backend in (("revolve", "torch"), ("torch-every-layer", "torch")):
        case = Case(model="mlp-stack", backend=backend, strategy=strategy, steps=6, snaps=1,
                    **TINY)  # fmt: skip
        assert not any("checkpoints nothing" in n for n in case.effective()[1])


@pytest.mark.torch
def test_one_segment_of_checkpoint_sequential_calls_every_layer_once():
    """What the note says, measured: one segment is the plain gradient (L calls), two
    segments of 6 layers rerun the first segment of 3 (6 + 3 calls)."""
    torch = pytest.importorskip("torch")
    from ckptbench.backends.torch.peers import sequential_chain

    calls = [0]
    weights = [torch.randn(4, 4, dtype=torch.float64, requires_grad=True) for _ in range(6)]

    def layer(i, w, x):
        calls[0] += 1
        return torch.tanh(x @ w)

    x0 = torch.randn(2, 4, dtype=torch.float64, requires_grad=True)
    for segments, expected in ((1, 6), (2, 9)):
        calls[0] = 0
        loop = sequential_chain(layer, 6, segments)
        loop(weights, x0).pow(2).mean().backward()
        assert calls[0] == expected
    assert repr(sequential_chain(layer, 6, 1)).startswith(
        "ChainPeerLoop(checkpoint_sequential, 1 segment,"
    )
    assert "2 segments," in repr(sequential_chain(layer, 6, 2))
