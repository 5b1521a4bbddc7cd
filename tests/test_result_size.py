"""A case whose result file could not be read back is refused before anything is measured:
``rounds x (warmup + repeats)`` iterations of each mode are all written to the file, and a
file past ``store.MAX_RESULT_BYTES`` is not read back. ``--rounds 10000 --repeats 10000``
was taken (each count is within ``schema.MAX_ROUNDS``) and would have measured for days to
write a file of about 118 GiB. One check for ``run``'s options, ``--precision``'s rounds, a
config's ``[case]`` and a sweep's grid cells (``results.resultsize``). The runner thins each
round's RSS timelines to what the rounds leave room for, so they are counted at their
bound."""

from __future__ import annotations

import json
from dataclasses import fields, replace
from pathlib import Path

import pytest
from _cli import one_line_error, run_cli
from _synthetic import CI_CASE, make_result

from ckptbench.results.schema import Iteration, Mode, save_result

ROUNDS = 32
#: The iterations a mode that fit at 32 rounds: (256 MiB - 64 KiB of header - 32 rounds of
#: 4 KiB of records and three timelines of 1875 samples at 64 bytes) // 1280 bytes an
#: iteration of the three modes (``results.resultsize``)
MOST = 200_561
#: warmup 0 and as many repeats as fit at 32 rounds: one more does not
EDGE = MOST // ROUNDS


@pytest.fixture(autouse=True)
def _here(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)

    def measured(*args, **kwargs):  # a run past its checks fails here, measuring nothing
        raise AssertionError("taken: run went past its checks")

    monkeypatch.setattr("ckptbench.cli.run.checked_in_worker", measured)


def test_the_edge_is_within_the_counts_own_bound() -> None:
    from ckptbench.results.resultsize import most_iterations

    assert most_iterations(ROUNDS) == MOST
    assert ROUNDS * EDGE <= MOST < ROUNDS * (EDGE + 1)
    assert EDGE + 1 <= 10_000  # so the size, not the count's bound, refuses it


def test_run_refuses_past_the_edge_in_one_line(capsys) -> None:
    argv = ["run", "--model", "rnn", "--steps", "20", "--rounds", str(ROUNDS), "--warmup", "0"]
    err = one_line_error(capsys, [*argv, "--repeats", str(EDGE + 1)])
    product = f"{ROUNDS * (EDGE + 1):,}"
    assert f"rounds x (warmup + repeats) = {ROUNDS} x {EDGE + 1:,} = {product} " in err, err
    assert f"more than the {MOST:,} that fit in the 256 MiB" in err, err
    with pytest.raises(AssertionError, match="went past its checks"):  # one under: taken
        run_cli(capsys, [*argv, "--repeats", str(EDGE)])


def test_run_refuses_the_largest_counts(capsys) -> None:
    argv = ["run", "--model", "rnn", "--steps", "20", "--rounds", "10000", "--repeats", "10000"]
    err = one_line_error(capsys, argv)
    assert "= 10,000 x 10,001 = 100,010,000 iterations a mode" in err, err


def test_precision_counts_the_rounds_it_may_add(capsys) -> None:
    argv = ["run", "--model", "rnn", "--steps", "20", "--warmup", "0", "--repeats", "10000",
            "--precision", "5%", "--max-rounds", "100"]  # fmt: skip
    err = one_line_error(capsys, argv)
    assert "--max-rounds x (warmup + repeats) = 100 x 10,000 = 1,000,000" in err, err


@pytest.mark.parametrize(("repeats", "refused"), [(EDGE, False), (EDGE + 1, True)])
def test_a_sweep_grid_and_case_are_held_to_the_same_edge(
    capsys, repeats: int, refused: bool
) -> None:
    base = f'[case]\nmodel = "rnn"\nsteps = 20\nrounds = {ROUNDS}\nwarmup = 0\n'
    Path("g.toml").write_text(f"{base}[grid]\nrepeats = [{repeats}]\n")
    Path("c.toml").write_text(f"{base}repeats = {repeats}\n")
    for name in ("g.toml", "c.toml"):
        if not refused:
            code, _, err = run_cli(capsys, ["sweep", name, "--dry-run"])
            assert code == 0, err
            continue
        err = one_line_error(capsys, ["sweep", name, "--dry-run"])
        where = "grid: cell (repeats=" if name == "g.toml" else "case: rounds x"
        assert where in err and f"more than the {MOST:,}" in err, err


def test_an_iteration_is_written_in_at_most_the_bytes_counted(tmp_path: Path) -> None:
    """The count is an upper bound: an iteration of each mode with every field at its
    longest (22-character floats, 12-digit byte counts, the device fields, four phases)
    adds at most ``ITERATION_BYTES`` to a saved result; a field added to ``Iteration``
    grows it and fails here until the count is measured again."""
    from ckptbench.results.resultsize import ITERATION_BYTES

    t, b = 1.2345678901234567e-05, 123_456_789_012
    longest = {f.name: t for f in fields(Iteration)} | {
        "peak_rss_bytes": b, "start_rss_bytes": b, "peak_device_bytes": b,
        "start_device_bytes": b, "device_peak_exact": False, "phases": {},
    }  # fmt: skip
    phases = {f"{k}_time_s": t for k in ("advance", "taped", "bookkeeping", "executor")}
    result = make_result(CI_CASE)
    save_result(result, tmp_path / "a.json")
    more = 100
    grown = []
    for m in result.modes:
        rec = Iteration(**{**longest, "phases": phases if m.mode is Mode.CHECKPOINTED else {}})
        grown.append(replace(m, iterations=(*m.iterations, *[rec] * more)))
    save_result(replace(result, modes=tuple(grown)), tmp_path / "b.json")
    added = (tmp_path / "b.json").stat().st_size - (tmp_path / "a.json").stat().st_size
    assert len({m.mode for m in result.modes}) == 3 and len(result.modes) == 3
    assert added / more <= ITERATION_BYTES, added / more
    assert json.loads((tmp_path / "b.json").read_text())["modes"]


def test_the_timelines_are_bounded_as_counted() -> None:
    from ckptbench.measure.launch import TIMELINE_POINTS
    from ckptbench.results.resultsize import TIMELINE_MOST, timeline_points

    assert TIMELINE_POINTS == TIMELINE_MOST == timeline_points(30)  # the default rounds
    assert timeline_points(32) == 1875 and timeline_points(10_000) == 16


def test_the_runner_thins_each_rounds_timeline_to_what_the_rounds_leave_room_for(
    tmp_path: Path, monkeypatch
) -> None:
    """Launch keeps 2000 samples a mode and round; at 40 rounds the runner keeps 1500, the
    first, the last and the highest of each stretch, so the peak survives."""
    from ckptbench.measure.runner import run_case
    from ckptbench.results.schema import ModeResult, Status

    timeline = tuple((i / 1000, 1000 + i % 97 + (5000 if i == 1234 else 0)) for i in range(2000))

    def measured(case, mode, *args, round_index=0, **kwargs):
        return ModeResult(mode, Status.FAILED, timeline=timeline, round=round_index), None

    monkeypatch.setattr("ckptbench.measure.runner.run_mode", measured)
    case = replace(CI_CASE, strategy="revolve", rounds=40)
    result = run_case(case, out_path=tmp_path / "r.json")
    assert len(result.modes) == 3 * 40
    for m in result.modes:
        assert len(m.timeline) == 1500, len(m.timeline)
        assert m.timeline[0] == timeline[0] and m.timeline[-1] == timeline[-1]
        assert max(r for _, r in m.timeline) == 6000 + 1234 % 97


def test_a_timeline_sample_is_written_in_at_most_the_bytes_counted(tmp_path: Path) -> None:
    from ckptbench.results.resultsize import TIMELINE_SAMPLE_BYTES

    result = make_result(CI_CASE)
    save_result(result, tmp_path / "a.json")
    more = 1000
    sample = (1234.5678901234567, 123_456_789_012)
    grown = tuple(replace(m, timeline=(*m.timeline, *[sample] * more)) for m in result.modes)
    save_result(replace(result, modes=grown), tmp_path / "b.json")
    added = (tmp_path / "b.json").stat().st_size - (tmp_path / "a.json").stat().st_size
    assert added / (more * len(grown)) <= TIMELINE_SAMPLE_BYTES, added / (more * len(grown))
