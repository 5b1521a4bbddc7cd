"""Leftovers of the thirteenth audit: a status-only ``check`` names every way to give it
limits, ``compare`` and ``run`` call their human-readable default by one name, and work
done twice for nothing is done once (``check``'s config files, the normal gradient file of
a round). The fake worker measures; nothing here is timed."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from _fake import use_fake_worker
from _synthetic import CI_CASE, GATED_SWEEP_TEXT, make_result
from click.testing import CliRunner

import ckptbench.sweep.config as sweep_config
from ckptbench.cli import cli
from ckptbench.measure.runner import run_case
from ckptbench.results.schema import Case, Mode, Status, save_result


@pytest.fixture
def fake(monkeypatch, tmp_path):
    use_fake_worker(monkeypatch, "GITHUB_STEP_SUMMARY")
    monkeypatch.chdir(tmp_path)
    return monkeypatch


def invoke(args):
    return CliRunner().invoke(cli, args, catch_exceptions=False)


def test_a_status_only_check_names_every_way_to_give_limits(tmp_path):
    """'status only, no limits' named --config and a sweep folder, not --against."""
    save_result(make_result(CI_CASE, seed=9), tmp_path / "r.json")
    save_result(make_result(CI_CASE, seed=3), tmp_path / "ref.json")
    res = invoke(["check", str(tmp_path / "r.json")])
    assert res.exit_code == 0 and "status only, no limits" in res.output
    (note,) = [x for x in res.output.splitlines() if x.startswith("note: no [expect]")]
    assert note == (
        "note: no [expect] thresholds: pass --config or check a sweep folder; or pass "
        "--against reference results to gate memory (and time, with --time-tolerance)"
    )
    res = invoke(["check", str(tmp_path / "r.json"), "--against", str(tmp_path / "ref.json")])
    assert "note: no [expect] thresholds: pass --config or check a sweep folder\n" in res.output


@pytest.mark.parametrize("command", ["run", "compare", "check", "plan"])
def test_every_command_calls_its_plain_text_default_text_and_takes_table_too(command):
    """compare's default was 'table', run's 'text' (each took both): one name in every help."""
    (option,) = [p for p in cli.commands[command].params if p.name == "fmt"]
    assert option.default == "text"
    assert option.type.convert("table", option, None) == "table"  # the older name kept
    assert "[default: text]" in " ".join(invoke([command, "--help"]).output.split())


def _counted(monkeypatch):
    parsed: list[str] = []
    real = sweep_config.parse_config

    def parse_config(text, source="<string>", default_name="sweep"):
        parsed.append(source)
        return real(text, source=source, default_name=default_name)

    monkeypatch.setattr(sweep_config, "parse_config", parse_config)
    return parsed


def test_check_parses_each_config_file_once(fake):
    """The sweep's config was parsed to find it (an input), again to say where the limits
    come from and a third time to compare it with the manifest's copy; --config twice."""
    Path("ci.toml").write_text(GATED_SWEEP_TEXT)
    for out in ("out", "ref"):
        assert invoke(["sweep", "ci.toml", "--out", out]).exit_code == 0
        fake.setenv("FAKE_SCALE", "1.0001")  # the reference is not the same measurement
    fake.delenv("FAKE_SCALE")
    parsed = _counted(fake)
    for args in (["out"], ["out", "--config", "ci.toml"], ["out", "--against", "ref"]):
        parsed.clear()
        res = invoke(["check", *args])
        assert res.exit_code == 0, res.output
        assert parsed == ["ci.toml"], args
    Path("ci.toml").write_text(GATED_SWEEP_TEXT.replace("1.5", "3.0"))  # the warning still comes
    parsed.clear()
    res = invoke(["check", "out"])
    assert parsed == ["ci.toml"]
    assert "warning: ci.toml on disk differs from that copy (memory_savings_min 3.0" in (res.output)
    Path("ci.toml").write_text("name = [")  # no longer loads: said once, read once
    parsed.clear()
    res = invoke(["check", "out"])
    assert parsed == ["ci.toml"] and res.output.count("on disk no longer loads") == 1


def test_a_round_reads_the_normal_gradient_once_when_checkpointed_ran_first(fake, tmp_path):
    """Normal's gradient was read for its own finiteness check and again, right after, to
    check the checkpointed result that ran before it."""
    loads: list[str] = []
    real = np.load

    def load(path, *args, **kw):
        loads.append(Path(path).name)
        return real(path, *args, **kw)

    fake.setattr(np, "load", load)
    case = Case(model="rnn", steps=20, snaps=4, hidden=8, batch=2, input=4, warmup=0,
                repeats=1, rounds=1)  # fmt: skip
    result = run_case(case, modes=(Mode.CHECKPOINTED, Mode.NORMAL))
    assert [m.mode for m in result.modes] == [Mode.CHECKPOINTED, Mode.NORMAL]
    assert all(m.status is Status.OK for m in result.modes)
    ckpt = result.mode(Mode.CHECKPOINTED)
    assert ckpt is not None and ckpt.grad_max_rel_err is not None  # still checked
    assert sorted(loads) == ["checkpointed-0.npy", "normal-0.npy"]
