"""Every number is true: a result file's figures recomputed from its raw samples with numpy,
scipy and pandas alone, from the definitions in README.md and docs/architecture.md ("Noise
and rounds"), never through ckptbench's summary code, and held against what ``compare``
prints in json, csv and markdown and what ``read_results`` (run's csv) gives.

Definitions recomputed here: a mode's peak and time are the medians of its iterations over
every round; overhead = peak - baseline's peak; a round's slowdown is the Hodges-Lehmann
ratio (median pairwise checkpointed / normal), the slowdown their geometric mean with a
Student t interval over rounds widened in quadrature by 0.5% (log scale); a round's savings
is (normal - baseline) / (checkpointed - baseline) of its median peaks, the savings their
median, its interval the t interval of the log savings widened by 0.1 MiB per overhead and
joined with [normal low / ckpt high, normal high / ckpt low] of the overhead intervals (the
iterations' range and a rerun's spread); the floor is normal's median + (evaluations -
steps) x baseline's median / steps, vs floor estimated round by round as the slowdown is.
Three rounds: no round is set aside as an outlier (that starts at four).
"""

from __future__ import annotations

import io
import json
import math
from decimal import ROUND_CEILING, ROUND_FLOOR, Decimal

import numpy as np
import pandas as pd
import pytest
from _cli import run_cli
from _synthetic import CI_CASE, make_result
from scipy import stats

from ckptbench.results.schema import save_result

MIB = 2**20
Z = stats.norm.ppf(0.975)
MODES = ("baseline", "normal", "checkpointed")


def _widen(lo: float, hi: float, centre: float, sd: float) -> tuple[float, float]:
    c = math.log(centre)
    low = math.hypot(c - math.log(lo), Z * sd)
    high = math.hypot(math.log(hi) - c, Z * sd)
    return math.exp(c - low), math.exp(c + high)


def _t_interval(logs: np.ndarray) -> tuple[float, float]:
    half = stats.t.ppf(0.975, logs.size - 1) * logs.std(ddof=1) / math.sqrt(logs.size)
    return math.exp(logs.mean() - half), math.exp(logs.mean() + half)


def _geomean_estimate(per_round: list[float]) -> tuple[float, float, float]:
    logs = np.log(per_round)
    value = math.exp(logs.mean())
    lo, hi = _t_interval(logs)
    return (value, *_widen(min(lo, value), max(hi, value), value, 0.005))


def _hodges_lehmann(num: np.ndarray, den: np.ndarray) -> float:
    return float(np.median((num[:, None] / den[None, :]).ravel()))


def _overhead_interval(mode: np.ndarray, base: np.ndarray) -> tuple[float, float, float]:
    value = float(np.median(mode) - np.median(base))
    a, b = mode.var(ddof=1) / mode.size, base.var(ddof=1) / base.size
    df = (a + b) ** 2 / (a**2 / (mode.size - 1) + b**2 / (base.size - 1))
    rerun = stats.t.ppf(0.975, df) * math.sqrt(math.pi * (a + b))
    rerun = math.hypot(rerun, Z * math.sqrt(2) * 0.1 * MIB)
    low = min(mode.min() - base.max(), value - rerun)
    high = max(mode.max() - base.min(), value + rerun)
    return value, float(low), float(high)


def _revolve_advances(steps: int, snaps: int) -> int:
    r = 0
    while math.comb(snaps + r, snaps) < steps:
        r += 1
    return r * steps - math.comb(snaps + r, snaps + 1)


def recompute(doc: dict) -> dict:
    """The figures of one result document, from its iterations and counters alone."""
    rows = [
        (m["round"], m["mode"], it["wall_time_s"], it["peak_rss_bytes"])
        for m in doc["modes"]
        if m["status"] == "ok"
        for it in m["iterations"]
    ]
    it = pd.DataFrame(rows, columns=["round", "mode", "wall", "peak"])
    rounds = sorted(it["round"].unique())
    assert len(rounds) == 3  # no outlier rule below four rounds
    get = {(r, m): g for (r, m), g in it.groupby(["round", "mode"])}
    wall = {k: g["wall"].to_numpy() for k, g in get.items()}
    peak = {k: g["peak"].to_numpy().astype(float) for k, g in get.items()}
    pooled_peak = it.groupby("mode")["peak"].median()
    pooled_time = it.groupby("mode")["wall"].median()
    out: dict = {f"{m}_time_s": float(pooled_time[m]) for m in ("normal", "checkpointed")}
    out["baseline_peak_bytes"] = float(pooled_peak["baseline"])
    spans = it.groupby("mode")["peak"].agg(lambda p: p.max() - p.min())
    out["baseline_peak_spread_bytes"] = float(spans["baseline"])
    every = {m: it.loc[it["mode"] == m, "peak"].to_numpy().astype(float) for m in MODES}
    over = {}
    for m in ("normal", "checkpointed"):
        over[m] = _overhead_interval(every[m], every["baseline"])
        v, lo, hi = over[m]
        out[f"{m}_overhead_bytes"], out[f"{m}_overhead_low_bytes"] = v, lo
        out[f"{m}_overhead_high_bytes"] = hi
    per_round = [_hodges_lehmann(wall[r, "checkpointed"], wall[r, "normal"]) for r in rounds]
    out["slowdown_per_round"] = per_round
    out["slowdown"], out["slowdown_low"], out["slowdown_high"] = _geomean_estimate(per_round)
    # savings: each round against its own baseline, the median over rounds
    on = [np.median(peak[r, "normal"]) - np.median(peak[r, "baseline"]) for r in rounds]
    oc = [np.median(peak[r, "checkpointed"]) - np.median(peak[r, "baseline"]) for r in rounds]
    ratios = np.array(on) / np.array(oc)
    value = float(np.median(ratios))
    lo, hi = _t_interval(np.log(ratios))
    rel = math.hypot(0.1 * MIB / np.median(on), 0.1 * MIB / np.median(oc))
    lo, hi = _widen(min(lo, value), max(hi, value), value, rel)
    n, c = over["normal"], over["checkpointed"]
    out["memory_savings"] = value
    out["memory_savings_low"] = min(lo, n[1] / c[2])
    out["memory_savings_high"] = max(hi, n[2] / c[1])
    ckpt = next(m for m in doc["modes"] if m["mode"] == "checkpointed")["counters"]
    steps, snaps = doc["case"]["steps"], doc["case"]["snaps"]
    evaluations = ckpt["steps_advanced"] + ckpt["steps_taped"]
    out["evaluations"], out["forward_steps"] = evaluations, ckpt["steps_advanced"]
    out["forward_steps_optimal"] = _revolve_advances(steps, snaps)
    out["evaluations_optimal"] = out["forward_steps_optimal"] + steps
    extra = evaluations - steps
    base_step = float(pooled_time["baseline"]) / steps
    out["floor_time_s"] = float(pooled_time["normal"]) + extra * base_step
    floors = [
        _hodges_lehmann(
            wall[r, "checkpointed"],
            wall[r, "normal"] + extra * np.median(wall[r, "baseline"]) / steps,
        )
        for r in rounds
    ]
    out["vs_floor_per_round"] = floors
    out["vs_floor"], out["vs_floor_low"], out["vs_floor_high"] = _geomean_estimate(floors)
    return out


def _down(v: float, places: int) -> str:
    return str(Decimal(repr(v)).quantize(Decimal(1).scaleb(-places), rounding=ROUND_FLOOR))


def _up(v: float, places: int) -> str:
    return str(Decimal(repr(v)).quantize(Decimal(1).scaleb(-places), rounding=ROUND_CEILING))


@pytest.fixture(scope="module")
def measured(tmp_path_factory):
    """A three-round result of noisy synthetic iterations, saved as run saves it."""
    case = CI_CASE.with_(repeats=2, rounds=3)  # an even count: a median between two
    path = tmp_path_factory.mktemp("cross") / "r.json"
    save_result(make_result(case, seed=11, rounds=3, time_cv=0.2), path)
    return path, recompute(json.loads(path.read_text()))


def test_the_summary_holds_the_figures_its_definitions_give(measured):
    path, want = measured
    s = json.loads(path.read_text())["summary"]
    assert s["slowdown_per_round"] == pytest.approx(want["slowdown_per_round"], rel=1e-12)
    assert s["vs_floor_per_round"] == pytest.approx(want["vs_floor_per_round"], rel=1e-12)
    for key, ci in (("slowdown", "slowdown_ci"), ("memory_savings", "memory_savings_ci"),
                    ("vs_floor", "vs_floor_ci")):  # fmt: skip
        assert s[key] == pytest.approx(want[key], rel=1e-9)
        assert s[ci] == pytest.approx([want[f"{key}_low"], want[f"{key}_high"]], rel=1e-9)
        assert s[ci][0] <= s[key] <= s[ci][1]
    assert s["floor_time_s"] == pytest.approx(want["floor_time_s"], rel=1e-12)
    assert s["step_evaluations"] == want["evaluations"]
    assert s["step_evaluations_optimal"] == want["evaluations_optimal"]
    for m in ("normal", "checkpointed"):
        assert s["overhead_bytes"][m] == pytest.approx(want[f"{m}_overhead_bytes"])
        got = s["overhead_interval_bytes"][m]
        assert (got["low"], got["high"]) == pytest.approx(
            (want[f"{m}_overhead_low_bytes"], want[f"{m}_overhead_high_bytes"]), rel=1e-9
        )


def test_compare_json_and_csv_give_those_figures_alike(measured, capsys):
    path, want = measured
    code, out, _ = run_cli(capsys, ["compare", str(path), "--format", "json"])
    assert code == 0
    (row,) = json.loads(out)
    code, out, _ = run_cli(capsys, ["compare", str(path), "--format", "csv"])
    assert code == 0
    (csv_row,) = pd.read_csv(io.StringIO(out)).to_dict("records")
    for key, value in want.items():
        if key.endswith("per_round"):
            continue
        # byte interval ends are whole bytes in both formats
        tol = 1.0 if key.endswith("_bytes") else 1e-9 * abs(value)
        assert row[key] == pytest.approx(value, abs=tol), key
        assert csv_row[key] == pytest.approx(row[key], rel=1e-12, abs=1e-12), key
    for name in ("slowdown", "memory_savings", "vs_floor"):
        assert row[f"{name}_low"] <= row[name] <= row[f"{name}_high"]
    # run's csv (read_results' tidy rows): the same figures per mode
    from ckptbench.frame import read_results

    tidy = read_results([path]).set_index("mode")
    for m in ("normal", "checkpointed"):
        assert tidy.loc[m, "overhead_bytes"] == pytest.approx(want[f"{m}_overhead_bytes"])
        assert tidy.loc[m, "time_median_s"] == pytest.approx(want[f"{m}_time_s"])
    for name in ("slowdown", "memory_savings", "vs_floor", "floor_time_s"):
        assert tidy.loc["checkpointed", name] == pytest.approx(want[name], rel=1e-9)


def test_compare_markdown_prints_them_rounded_as_documented(measured, capsys):
    """Figures to their decimals, interval ends rounded outward, MiB of 2**20 bytes."""
    path, want = measured
    code, out, _ = run_cli(capsys, ["compare", str(path), "--format", "markdown"])
    assert code == 0
    lines = [x for x in out.splitlines() if x.startswith("|")]
    head = [c.strip() for c in lines[0].strip("|").split("|")]
    cells = dict(zip(head, [c.strip().rstrip("*") for c in lines[2].strip("|").split("|")],
                     strict=True))  # fmt: skip

    def shown(name: str, places: int, unit: str = "x", scale: float = 1.0, sign: str = "") -> str:
        unit_key = "_bytes" if name.endswith("_overhead") else ""
        v, lo, hi = (want[f"{name}{k}{unit_key}"] / scale for k in ("", "_low", "_high"))
        return f"{sign}{v:.{places}f}{unit} [{sign}{_down(lo, places)}, {sign}{_up(hi, places)}]"

    assert cells["slowdown [95%]"] == shown("slowdown", 2)
    assert cells["vs floor [95%]"] == shown("vs_floor", 2)
    assert cells["savings [95%]"] == shown("memory_savings", 1)
    assert cells["normal +MiB"] == shown("normal_overhead", 2, "", MIB, "+")
    assert cells["ckpt +MiB"] == shown("checkpointed_overhead", 2, "", MIB, "+")
    assert cells["base MiB"] == f"{want['baseline_peak_bytes'] / MIB:.2f}"
    assert cells["base spread"] == f"{want['baseline_peak_spread_bytes'] / MIB:.2f}"
    assert cells["ckpt s"] == f"{want['checkpointed_time_s']:.3f}"
    assert cells["normal s"] == f"{want['normal_time_s']:.3f}"
    assert cells["evals (opt)"] == f"{want['evaluations']} ({want['evaluations_optimal']})"


@pytest.mark.parametrize("check", ["memory_savings_min", "slowdown_max"])
@pytest.mark.parametrize("side", [-1, 1])
def test_checks_verdict_agrees_with_both_numbers_it_prints(measured, capsys, check, side):
    """A limit a hair from the figure: the verdict is the raw comparison, and the printed
    figure and the printed limit compare the same way ('%g' printed a limit to 6 digits:
    'memory_savings_min: 17.82259714x (need >= 17.8226x)' on a line that passed)."""
    import re

    path, want = measured
    value = want["memory_savings" if check == "memory_savings_min" else "slowdown"]
    limit = value * (1 + side * 1e-9)  # one side or the other of it reads 6 digits wrong
    config = path.parent / f"expect-{check}-{side}.toml"
    config.write_text(
        f'name = "x"\n[case]\nmodel = "lstm"\n[expect]\n{check} = {limit!r}\n', encoding="utf-8"
    )
    code, out, _ = run_cli(capsys, ["check", str(path), "--config", str(config)])
    (line,) = [x for x in out.splitlines() if f" {check}: " in x]
    passed = value >= limit if check == "memory_savings_min" else value <= limit
    assert line.startswith("ok" if passed else "FAIL") and code == (0 if passed else 1)
    got, need = re.search(r": ([0-9.]+)x.*need [<>]= ([0-9.e+-]+)x", line).groups()
    if check == "memory_savings_min":
        assert (float(got) >= float(need)) == passed, line
    else:
        assert (float(got) <= float(need)) == passed, line
