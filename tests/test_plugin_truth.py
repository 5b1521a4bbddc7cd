"""Figures a plug-in cannot make untrue: a plug-in that replaces ``time.perf_counter`` does
not move the clock ckptbench times with (``engine/clock.py``), and a clock that stands
still or runs slow makes the times unstable, with the reason said
(``analysis/stability.clock_verdicts``)."""

from __future__ import annotations

import hashlib
import json
import textwrap
from dataclasses import replace

import pytest
from _cli import run_cli
from _synthetic import make_result, with_case

from ckptbench.analysis.stability import VerdictKind, clock_verdicts, thread_share
from ckptbench.render.caveats import warning_lines
from ckptbench.results.schema import Case

#: An autograd plug-in that stops every clock of the ``time`` module when imported.
STOPPED_CLOCK = textwrap.dedent(
    """
    import time

    import autograd.numpy as np

    time.perf_counter = lambda: 0.0
    time.process_time = lambda: 0.0
    time.thread_time = lambda: 0.0

    class W:
        def init(self, steps, rng):
            p = {"W": rng.standard_normal((8, 8)) * 0.1, "V": rng.standard_normal((8, 1))}
            return p, np.zeros((2, 8)), rng.standard_normal((steps, 2, 8))

        def step(self, p, s, x):
            return np.tanh(s @ p["W"] + x)

        def post(self, p, s):
            return s @ p["V"]

        def loss(self, ys):
            return np.mean(ys ** 2)

    def make(hidden=8, batch=2, input=8, output=1):
        return W()
    """
)


@pytest.mark.slow
def test_a_plugin_replacing_the_clock_does_not_move_ckptbenchs(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "stopped.py").write_text(STOPPED_CLOCK)
    argv = ["run", "--model", "stopped.py:make", "--steps", "10", "--snaps", "3",
            "--rounds", "1", "--warmup", "0", "--repeats", "2", "--precision", "off",
            "--out", "r.json", "-q"]  # fmt: skip
    code, _, err = run_cli(capsys, argv)
    assert code == 0, err
    modes = json.loads((tmp_path / "r.json").read_text())["modes"]
    its = [it for m in modes for it in m["iterations"]]
    assert its and all(it["wall_time_s"] > 0 and it["cpu_time_s"] > 0 for it in its)
    assert all(0 < it["thread_cpu_time_s"] <= it["wall_time_s"] for it in its)
    ckpt = next(m for m in modes if m["mode"] == "checkpointed")
    assert any(v > 0 for it in ckpt["iterations"] for v in it["phases"].values())


def test_a_thread_using_more_cpu_than_wall_time_or_a_clock_standing_still_is_said():
    times = [{"normal": [0.01, 0.012], "checkpointed": [0.0, 0.0]}]
    verdicts = clock_verdicts(times, {"normal": 99.0, "checkpointed": 0.97})
    kinds = {(v.kind, v.mode) for v in verdicts}
    assert kinds == {(VerdictKind.ZERO_TIME, "checkpointed"), (VerdictKind.CLOCK_SLOW, "normal")}
    assert all(v.about_time for v in verdicts)
    # an honest thread: at most the wall time, with clock reads inside the window
    assert clock_verdicts([{"normal": [0.01]}], {"normal": 1.0}) == ()
    assert thread_share([(0.009, 0.01), (None, 0.01), (0.5, 0.0)]) == pytest.approx(0.9)
    assert thread_share([(None, 0.01)]) is None


def test_a_slow_clock_makes_the_times_unstable_with_the_reason():
    result = make_result(Case(model="rnn", steps=20, snaps=4, repeats=3))
    assert not any(v.kind is VerdictKind.CLOCK_SLOW for v in result.summary.noise)
    # what a plug-in dividing time.perf_counter by 100 records: CPU time 100x the wall time
    slow = tuple(
        replace(
            m,
            iterations=tuple(
                replace(it, thread_cpu_time_s=it.wall_time_s * 100) for it in m.iterations
            ),
        )
        if m.mode.value == "normal"
        else m
        for m in result.modes
    )
    faked = replace(result, modes=slow)
    assert faked.summary.time_unstable
    assert [v.mode for v in faked.summary.noise if v.kind is VerdictKind.CLOCK_SLOW] == ["normal"]
    line = next(w for w in warning_lines(faked) if "clock ran slow" in w)
    assert "up to 100" in line and line.endswith(": normal")


# ------------------------------------------------------------ a --costs file of other states

#: A layer chain whose states widen and narrow: x_0 is (batch, 4), then 16, 2, 16, ... wide.
CHAIN = textwrap.dedent(
    """
    import autograd.numpy as np

    WIDTHS = [16, 2, 16, 4]

    class Chain:
        def __init__(self, batch):
            self.b = batch

        def init(self, layers, rng):
            ws = [4] + [WIDTHS[k % 4] for k in range(layers)]
            params = [{"W": rng.standard_normal((ws[k], ws[k + 1])) * 0.3}
                      for k in range(layers)]
            return params, rng.standard_normal((self.b, 4))

        def layer(self, i, params, x):
            return np.tanh(x @ params["W"])

        def loss(self, x):
            return np.mean(x ** 2)

    def make(hidden=8, batch=2, input=4, output=1):
        return Chain(batch)
    """
)


def _chain_costs(batch: int, steps: int = 4) -> dict:
    widths = [4, 16, 2, 16][:steps]
    return {"forward_time_s": 1e-5, "taped_time_s": 2e-5, "fixed_time_s": 0.0,
            "state_bytes": [batch * w * 8 for w in widths], "tape_bytes": 1000}  # fmt: skip


def test_the_plugin_check_measures_the_state_each_step_starts_from(tmp_path, monkeypatch):
    from ckptbench.workloads.check import check_workload

    monkeypatch.chdir(tmp_path)
    (tmp_path / "chain.py").write_text(CHAIN)
    case = Case(model="chain.py:make", steps=4, strategy="optimal", budget_bytes=2**20, batch=3)
    report = check_workload(case)
    assert report["problem"] is None and report["chain"] is True
    assert report["state_bytes"] == _chain_costs(3)["state_bytes"]


def test_a_costs_file_of_other_states_than_the_plugins_is_noted_with_the_real_figure():
    from ckptbench.cli.costs_file import costs_note

    case = Case(model="chain.py:make", steps=4, strategy="optimal", budget_bytes=8192, batch=64)
    real = _chain_costs(64)["state_bytes"]
    note = costs_note("c.json", _chain_costs(2), case, real)
    assert note is not None
    assert "step 0's state is 64 B there, but 2048 B in --model chain.py:make" in note
    assert "follow the file" in note
    assert costs_note("c.json", _chain_costs(64), case, real) is None
    assert costs_note("c.json", _chain_costs(2), case, None) is None  # not measured: unknown


@pytest.mark.slow
def test_run_notes_a_plugins_costs_file_of_other_sizes(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "chain.py").write_text(CHAIN)
    (tmp_path / "c.json").write_text(json.dumps(_chain_costs(2)))
    argv = ["run", "--model", "chain.py:make", "--steps", "4", "--batch", "64", "--strategy",
            "optimal", "--budget", "8KiB", "--costs", "c.json", "--rounds", "1", "--warmup",
            "0", "--repeats", "1", "--precision", "off", "--out", "r.json"]  # fmt: skip
    code, out, err = run_cli(capsys, argv)
    assert code == 0, err
    assert "step 0's state is 64 B there, but 2048 B in --model chain.py:make" in err
    assert "as the costs size its states, not as they are" in out


@pytest.mark.slow
def test_plan_checks_a_plugin_with_a_costs_file_as_run_does(tmp_path, monkeypatch, capsys):
    """``plan --costs`` with a plug-in ran no check: no note on the costs' other states, and
    a plug-in that run refuses was planned for (exit 0)."""
    from _cli import one_line_error

    monkeypatch.chdir(tmp_path)
    (tmp_path / "chain.py").write_text(CHAIN)
    (tmp_path / "c.json").write_text(json.dumps(_chain_costs(2)))
    argv = ["plan", "--model", "chain.py:make", "--steps", "4", "--batch", "64", "--budget",
            "8KiB", "--costs", "c.json"]  # fmt: skip
    code, out, err = run_cli(capsys, argv)
    assert code == 0, err
    assert "step 0's state is 64 B there, but 2048 B in --model chain.py:make" in err
    assert "measuring" not in err and "optimal" in out  # planned from the file, as asked
    code, out, err = run_cli(capsys, [*argv, "-q"])  # -q keeps the warning, as run's does
    assert code == 0 and err.startswith("warning: --costs c.json: step 0's state is 64 B"), err
    (tmp_path / "bad.py").write_text(CHAIN.replace("np.mean(x ** 2)", "x"))
    err = one_line_error(capsys, [*argv[:2], "bad.py:make", *argv[3:]])
    assert "--model bad.py:make: loss must return a scalar" in err


def test_the_plan_line_says_the_stored_bytes_follow_costs_of_other_states():
    from ckptbench.render.run import explain_lines
    from ckptbench.results.schema import Mode

    result = with_case(
        make_result(Case(model="rnn", steps=4, snaps=2, repeats=3)),
        strategy="optimal",
        budget_bytes=8192,
        batch=64,
    )

    def planned(costs: dict):
        plan = {"predicted_time_s": 0.5, "peak_bytes": 6000, "costs": costs}
        modes = tuple(
            replace(m, plan=plan, counters={**m.counters, "state_bytes": 2048})
            if m.mode is Mode.CHECKPOINTED
            else m
            for m in result.modes
        )
        (line,) = [x for x in explain_lines(replace(result, modes=modes)) if x.startswith("plan:")]
        return line

    line = planned(_chain_costs(2))
    assert "stored by the executor as the costs size its states, not as they are" in line
    assert "(the first state: 64 B in the costs, 2.00 KiB here)" in line
    assert "not as they are" not in planned(_chain_costs(64))


# ------------------------------------------------------------ a plug-in edited mid-run

#: The autograd plug-in of this file's clock test, without the stopped clock, that appends
#: a line to its own file on its third import (the check, then round 1's first mode, then
#: its second): a user editing the plug-in while the run measures.
SELF_EDITING = STOPPED_CLOCK.replace(
    """time.perf_counter = lambda: 0.0
time.process_time = lambda: 0.0
time.thread_time = lambda: 0.0
""",
    """import os
_n = int(open("count").read()) if os.path.exists("count") else 0
open("count", "w").write(str(_n + 1))
if _n == 2:
    with open(__file__, "a") as f:
        f.write("\\nDELAY = 0.002\\n")
""",
)


@pytest.mark.slow
def test_a_plugin_edited_mid_run_fails_the_modes_after_the_change(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "editing.py").write_text(SELF_EDITING)
    argv = ["run", "--model", "editing.py:make", "--steps", "10", "--snaps", "3",
            "--rounds", "2", "--warmup", "0", "--repeats", "1", "--precision", "off",
            "--out", "r.json"]  # fmt: skip
    code, _, err = run_cli(capsys, argv)
    assert (tmp_path / "count").read_text() == "3"  # no worker loaded the edited file
    assert code != 0
    assert "the plug-in's file editing.py changed while it ran" in err
    doc = json.loads((tmp_path / "r.json").read_text())
    assert doc["environment"]["plugin_changed"]["round"] == 1
    status = {(m["round"], m["mode"]): (m["status"], m.get("error") or "") for m in doc["modes"]}
    assert status[(0, "baseline")][0] == "ok"
    changed = [k for k, (s, why) in status.items() if s == "failed" and "file editing.py" in why]
    assert (0, "normal") in changed and (0, "checkpointed") in changed
    assert all((1, m) in changed for m in ("baseline", "normal", "checkpointed"))
    assert doc["summary"]["slowdown"] is None  # nothing pooled across the change


def test_a_model_typed_with_spaces_around_it_is_the_same_case_and_key():
    plain = Case(model="lstm", steps=20, snaps=4)
    spaced = Case(model=" lstm ", steps=20, snaps=4)
    assert spaced.model == "lstm" and spaced.key == plain.key and spaced == plain
    assert Case.from_dict({**plain.to_dict(), "model": "lstm "}).key == plain.key


# ------------------------------------------------------------ a module it imports, edited

#: The plug-in of the clock test, without the stopped clock, importing a helper module from
#: its own folder (``helper.SCALE`` scales its step); it rewrites the helper on its import
#: number ``EDIT`` + 1 (0: the check, 1: round 1's first mode, 2: its second; -1: never).
USES_HELPER = STOPPED_CLOCK.replace(
    """time.perf_counter = lambda: 0.0
time.process_time = lambda: 0.0
time.thread_time = lambda: 0.0
""",
    """import os
import sys
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import helper
_n = int(open("count").read()) if os.path.exists("count") else 0
open("count", "w").write(str(_n + 1))
if _n == EDIT:
    with open(helper.__file__, "a") as f:
        f.write("SCALE = 0.5\\n")
""",
).replace('np.tanh(s @ p["W"] + x)', 'np.tanh(helper.SCALE * (s @ p["W"]) + x)')


def _helper_run(tmp_path, monkeypatch, capsys, edit: int):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "helper.py").write_text("SCALE = 1.0\n")
    (tmp_path / "uses.py").write_text(USES_HELPER.replace("EDIT", str(edit)))
    argv = ["run", "--model", "uses.py:make", "--steps", "10", "--hidden", "8", "--snaps", "3",
            "--rounds", "2", "--warmup", "0", "--repeats", "1", "--precision", "off",
            "--out", "r.json"]  # fmt: skip
    code, _, err = run_cli(capsys, argv)
    return code, err, json.loads((tmp_path / "r.json").read_text())


@pytest.mark.slow
def test_a_module_the_plugin_imports_edited_mid_run_fails_the_modes_after_it(
    tmp_path, monkeypatch, capsys
):
    code, err, doc = _helper_run(tmp_path, monkeypatch, capsys, edit=2)
    assert "SCALE = 0.5" in (tmp_path / "helper.py").read_text()
    assert code != 0
    assert "the file helper.py the plug-in imports changed" in err
    changed = doc["environment"]["plugin_changed"]
    assert changed["round"] == 1 and changed["file"] == "helper.py"
    status = {(m["round"], m["mode"]): (m["status"], m.get("error") or "") for m in doc["modes"]}
    assert status[(0, "baseline")][0] == "ok"
    failed = [k for k, (s, why) in status.items() if s == "failed" and "file helper.py" in why]
    assert (0, "normal") in failed and (0, "checkpointed") in failed
    assert all((1, m) in failed for m in ("baseline", "normal", "checkpointed"))
    assert doc["summary"]["slowdown"] is None  # nothing pooled across the edit


@pytest.mark.slow
def test_a_run_records_the_digest_of_each_module_the_plugin_imports(tmp_path, monkeypatch, capsys):
    code, err, doc = _helper_run(tmp_path, monkeypatch, capsys, edit=-1)
    assert code == 0, err
    plugin = doc["environment"]["plugin"]
    digest = hashlib.sha256(b"SCALE = 1.0\n").hexdigest()
    assert plugin["imports"] == {"helper.py": digest}  # not uses.py: that is plugin.sha256
    assert plugin["path"] == "uses.py" and "plugin_changed" not in doc["environment"]
    assert all(m["status"] == "ok" for m in doc["modes"])


@pytest.mark.slow
def test_a_module_edited_during_the_first_mode_fails_it_from_the_checks_digest(
    tmp_path, monkeypatch, capsys
):
    """The watch starts at the plug-in check, which reports the helper with its digest: an
    edit while round 1's first mode runs (before any worker reported its files) fails that
    mode and every later one, naming both digests."""
    code, err, doc = _helper_run(tmp_path, monkeypatch, capsys, edit=1)
    old = hashlib.sha256(b"SCALE = 1.0\n").hexdigest()
    new = hashlib.sha256((tmp_path / "helper.py").read_bytes()).hexdigest()
    assert new != old and code != 0
    assert (
        f"the file helper.py the plug-in imports changed while it ran (SHA-256 {old[:12]} at "
        f"the plug-in check, {new[:12]} now)"
    ) in err
    plugin = doc["environment"]["plugin"]
    assert plugin["imports"] == {"helper.py": old}
    assert plugin["watched_since"] == {"uses.py": "check", "helper.py": "check"}
    changed = doc["environment"]["plugin_changed"]
    assert (changed["round"], changed["mode"], changed["file"]) == (1, "baseline", "helper.py")
    assert changed["sha256"] == new
    status = {(m["round"], m["mode"]): (m["status"], m.get("error") or "") for m in doc["modes"]}
    assert len(status) == 6
    assert all(s == "failed" and "file helper.py" in why for s, why in status.values())
    assert doc["summary"]["slowdown"] is None  # nothing pooled across the edit


@pytest.mark.slow
def test_a_module_edited_after_the_check_fails_the_first_mode_before_it_starts(
    tmp_path, monkeypatch
):
    from ckptbench.measure.runner import run_case
    from ckptbench.measure.tasks import checked_plugin
    from ckptbench.results.schema import Mode

    monkeypatch.chdir(tmp_path)
    (tmp_path / "helper.py").write_text("SCALE = 1.0\n")
    (tmp_path / "uses.py").write_text(USES_HELPER.replace("EDIT", "-1"))
    case = Case(model="uses.py:make", steps=10, hidden=8, snaps=3, rounds=1, warmup=0, repeats=1)
    checked = checked_plugin(case)
    (tmp_path / "helper.py").write_text("SCALE = 0.5\n")  # after the check, before any mode
    result = run_case(checked.case, modes=(Mode.BASELINE,), checked_sources=checked.sources)
    (mode,) = result.modes
    old, new = (hashlib.sha256(t).hexdigest() for t in (b"SCALE = 1.0\n", b"SCALE = 0.5\n"))
    assert mode.status.value == "failed" and not mode.iterations
    assert mode.error.startswith(
        f"the file helper.py the plug-in imports changed before it started (SHA-256 "
        f"{old[:12]} at the plug-in check, {new[:12]} now)"
    )
    assert result.environment["plugin"]["watched_since"]["helper.py"] == "check"


def test_the_watch_starts_at_the_check_and_takes_in_files_later_reports_add(tmp_path, monkeypatch):
    """No worker here: the parent's side of the watch, from the check's files and digests
    (the plug-in's own file among them), then a mode's report naming one more file."""
    from ckptbench.measure import sources

    monkeypatch.chdir(tmp_path)
    texts = {"uses.py": b"import helper\n", "helper.py": b"A = 1\n", "lazy.py": b""}
    for name, text in texts.items():
        (tmp_path / name).write_bytes(text)
    sha = {name: hashlib.sha256(text).hexdigest() for name, text in texts.items()}
    at_check = sources.CheckedSources(
        ((str(tmp_path / "helper.py"), sha["helper.py"]), (str(tmp_path / "uses.py"), "0" * 64)),
        total=3,  # one more than the check reported: not watched
    )
    env = {"plugin": {"path": "uses.py", "sha256": sha["uses.py"]}}
    sources.start_watch(env, at_check)
    plugin = env["plugin"]
    assert plugin["sha256"] == "0" * 64  # the check loaded other code than the file has now
    assert plugin["imports"] == {"helper.py": sha["helper.py"]}
    assert plugin["imports_not_watched"] == 1
    why = sources.plugin_changed(env, "uses.py:make", 0, "baseline", "before it started")
    assert why.startswith(
        "the plug-in's file uses.py changed before it started (SHA-256 000000000000 at the "
        f"plug-in check, {sha['uses.py'][:12]} now)"
    )
    plugin["sha256"] = sha["uses.py"]
    (tmp_path / "helper.py").write_text("A = 2\n")  # a report now does not move its digest
    files = [str(tmp_path / n) for n in ("helper.py", "lazy.py", "uses.py")]
    sources.record_worker(env, {"user_files": files, "user_files_total": 3}, "round 1 checkpointed")
    assert plugin["imports"] == {"helper.py": sha["helper.py"], "lazy.py": sha["lazy.py"]}
    assert plugin["watched_since"] == {
        "uses.py": "check", "helper.py": "check", "lazy.py": "round 1 checkpointed"
    }  # fmt: skip
    why = sources.plugin_changed(env, "uses.py:make", 0, "normal", "while it ran")
    assert why.startswith(
        "the file helper.py the plug-in imports changed while it ran (SHA-256 "
        f"{sha['helper.py'][:12]} at the plug-in check"
    )
    env.pop("plugin_changed")
    (tmp_path / "helper.py").write_text("A = 1\n")
    (tmp_path / "lazy.py").write_text("B = 1\n")
    why = sources.plugin_changed(env, "uses.py:make", 1, "normal", "while it ran")
    assert "(SHA-256 e3b0c44298fc when the round 1 checkpointed worker reported it" in why
    assert env["plugin_changed"]["file"] == "lazy.py"
