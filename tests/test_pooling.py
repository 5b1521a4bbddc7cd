"""Several invocations of one cell pooled with a random-effects model
(``ckptbench.analysis.pooling``): simulated invocations with known between-invocation
offsets, coverage of the truth, and the degenerate inputs."""

from __future__ import annotations

import math

import numpy as np
import pytest

from ckptbench.analysis.intervals import Estimate, IntervalError
from ckptbench.analysis.pooling import pooled_estimate

Z = 1.959963984540054
T19 = 2.093024054408263  # Student t, 97.5%, 19 df: the interval of a run of 20 rounds


def invocation(rng, truth: float, tau: float, se: float) -> Estimate:
    """One run: its own offset (tau) and its sampling error (se), reported with a 95%
    interval whose width is itself estimated (a t interval over ~20 rounds)."""
    y = math.log(truth) + rng.normal(0, tau) + rng.normal(0, se)
    se_seen = se * math.sqrt(rng.chisquare(19) / 19)
    return Estimate(math.exp(y), math.exp(y - T19 * se_seen), math.exp(y + T19 * se_seen),
                    "simulated", 20, 40)  # fmt: skip


@pytest.mark.parametrize("tau", [0.0, 0.02, 0.04, 0.08])
@pytest.mark.parametrize("k", [3, 4, 6])
def test_pooled_interval_covers_the_truth_with_drift_between_invocations(tau, k):
    # the AMD EPYC VM of this round: runs with +/-5% intervals (se 2.5%) whose estimates
    # moved by ~4% (tau) between invocations; a run's own interval covered the others'
    # estimates only when tau was small
    rng = np.random.default_rng(1000 + k + int(tau * 1000))
    truth, se, n = 1.30, 0.025, 400
    covered, widths, own = 0, [], 0
    for _ in range(n):
        runs = [invocation(rng, truth, tau, se) for _ in range(k)]
        pooled = pooled_estimate(runs)
        covered += pooled.estimate.contains(truth)
        widths.append(pooled.estimate.half_width_rel)
        own += runs[0].contains(truth)
    assert covered / n >= 0.90, (covered / n, own / n)
    # not absurdly wide: with no drift, about the pooled standard error's t interval
    if tau == 0.0:
        assert float(np.median(widths)) <= 3 * Z * se / math.sqrt(k)
    if tau >= 0.04:
        assert own / n < 0.8  # what one invocation's interval misses, and pooling does not


def test_pooling_recovers_the_between_invocation_spread():
    rng = np.random.default_rng(7)
    taus = [pooled_estimate([invocation(rng, 1.3, 0.05, 0.01) for _ in range(8)]).tau
            for _ in range(200)]  # fmt: skip
    assert 0.035 <= float(np.median(taus)) <= 0.065


def test_agreeing_invocations_pool_to_a_narrower_interval():
    runs = [Estimate(1.30, 1.24, 1.36, "m", 6, 12) for _ in range(4)]
    pooled = pooled_estimate(runs)
    assert pooled.tau == 0.0 and pooled.invocations == 4
    assert pooled.estimate.value == pytest.approx(1.30)
    assert pooled.estimate.half_width_rel < runs[0].half_width_rel
    assert pooled.estimate.n_rounds == 24 and "4 invocations" in pooled.estimate.method


def test_pooling_refuses_what_it_cannot_pool():
    one = Estimate(1.3, 1.2, 1.4, "m", 6, 12)
    with pytest.raises(IntervalError, match="at least two"):
        pooled_estimate([one])
    with pytest.raises(IntervalError, match="positive"):
        pooled_estimate([one, Estimate(1.3, 1.2, math.inf, "m", 1, 2)])


def test_two_agreeing_three_round_runs_do_not_pool_to_an_interval_neither_allows():
    """The audit's case: 5.1x [3.0, 9.4] and 5.7x [3.4, 9.6], each a t interval over three
    rounds (t = 4.30), read back as if normal (z = 1.96), pooled to 5.4x [0.3, 89.7]: 'may
    cost memory' from two runs that both exclude it."""
    runs = [Estimate(5.1, 3.0, 9.4, "m", 3, 9), Estimate(5.7, 3.4, 9.6, "m", 3, 9)]
    pooled = pooled_estimate(runs)
    assert pooled.tau == 0.0
    assert 1.0 < pooled.estimate.low < 3.0 and 9.6 < pooled.estimate.high < 30.0
