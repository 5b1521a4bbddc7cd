"""Leftovers of the twenty-fourth audit: a closed stderr (``2>&-``) left descriptor 2 free
for the next file ckptbench opened, so an error line could land in it; an output option
with a symbolic-link loop on its folder's path said 'cannot be checked (Too many levels of
symbolic links)' where every other path says the link leads nowhere; ``sweep --dry-run
--dask`` said nothing of a missing ``distributed``, which the sweep refuses; the sweep's
progress lines said a long ETA in hours only. Synthetic results; nothing here is timed."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from _cli import one_line_error
from _edges import NOWHERE, TINY, write_inputs
from _synthetic import CI_CASE


@pytest.fixture
def inputs(tmp_path, monkeypatch):
    """A result, a costs file and a sweep config in ``tmp_path``, the current folder."""
    monkeypatch.chdir(tmp_path)
    return write_inputs(tmp_path, "leftovers")


def _env(**extra: str) -> dict[str, str]:
    """This environment (its PYTHONPATH names the ckptbench under test), ``extra`` added;
    an extra PYTHONPATH goes first."""
    path = os.pathsep.join(
        p for p in (extra.pop("PYTHONPATH", ""), os.environ.get("PYTHONPATH")) if p
    )
    return {**os.environ, "PYTHONPATH": path, **extra}


# ------------------------------------------------------------------- (1) stderr closed

SCHEDULE = ["schedule", "--steps", "10", "--snaps", "3"]
ENDS = [(SCHEDULE, 0), (["run", "--steps", "0"], 2), (["compare", "missing.json"], 2)]
#: ckptbench's main in a process started with stderr closed; then, as a command would, a
#: file opened and an error line written to descriptor 2: that line must not land in it.
AFTER_MAIN = """\
import os, sys
from ckptbench.cli import main
try:
    main(sys.argv[2:])
except SystemExit as stop:
    status = stop.code
with open(sys.argv[1], "w") as f:
    fd = f.fileno()
    os.write(2, b"an error line\\n")
print(f"fd {fd} status {status}")
"""


def _closed_stderr(argv: list[str], cwd: Path):
    """``ARGV 2>&-`` in a real process (stderr closed, not /dev/null)."""
    return subprocess.run(
        ["bash", "-c", '"$@" 2>&-', "bash", *argv],
        stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, text=True, cwd=cwd, env=_env(),
    )  # fmt: skip


@pytest.mark.parametrize(("argv", "status"), ENDS[:2], ids=["schedule", "bad-input"])
def test_a_closed_stderr_is_no_file_of_the_command(inputs, argv, status):
    """With stderr closed, descriptor 2 was free: the next file opened took it, and an error
    line written to stderr landed in that file. Now /dev/null holds it, as stdout's."""
    proc = _closed_stderr([sys.executable, "-c", AFTER_MAIN, "later.txt", *argv], inputs)
    _, fd, _, said = proc.stdout.splitlines()[-1].split()
    assert (fd != "2", said) == (True, str(status)), proc.stdout
    assert (inputs / "later.txt").read_text() == ""


@pytest.mark.parametrize(("argv", "status"), ENDS, ids=["schedule", "bad-input", "missing"])
def test_a_closed_stderr_keeps_the_exit_status(inputs, argv, status):
    """`ckptbench ... 2>&-`: nothing can be said, and the status still says what happened
    (no traceback attempt turns a refusal into 1, nor a success into a failure)."""
    proc = _closed_stderr([sys.executable, "-m", "ckptbench", *argv], inputs)
    assert proc.returncode == status
    assert bool(proc.stdout) == (status == 0)


# ------------------------------------------------------ (2) a loop on an output's path

PLAN = ["plan", "--model", "rnn", "--steps", "20", "--hidden", "8", "--budget", "1MiB",
        "--save-costs", "loop/c.json"]  # fmt: skip
OUTPUTS = [
    (["compare", "r.json", "-o", "loop/x.html"], "-o loop/x.html"),
    (["compare", "r.json", "--plots", "loop/p"], "--plots loop/p/"),
    (["compare", "r.json", "--mprof", "loop/m"], "--mprof loop/m"),
    (["check", "r.json", "--junit", "loop/j.xml"], "--junit loop/j.xml"),
    (["check", "r.json", "--summary", "loop/s.md"], "--summary loop/s.md"),
    (["run", *TINY, "--out", "loop/x.json"], "--out loop/x.json"),
    (["run", *TINY, "--out", "x.json", "--mprof", "loop/m"], "--mprof loop/m"),
    (["sweep", "s.toml", "--out", "loop/d"], "--out loop/d"),
    (PLAN, "--save-costs loop/c.json"),
]


@pytest.mark.parametrize(("argv", "named"), OUTPUTS, ids=[f"{a[0]} {n}" for a, n in OUTPUTS])
def test_a_loop_on_an_outputs_path_leads_nowhere(inputs, capsys, argv, named):
    """`compare r.json --plots loop/p` said 'cannot be checked (Too many levels of symbolic
    links)' (`sweep --out loop/d`: 'cannot create the results folder (...)'), where a link
    to nothing, or a loop given as input, says it leads nowhere: said alike now
    (results.inputs.leads_nowhere), the loop named."""
    os.symlink("loop", inputs / "loop")
    err = one_line_error(capsys, argv)
    assert err.startswith(f"ckptbench: error: {named}"), err
    assert err.endswith(f": loop {NOWHERE}\n"), err
    assert "Too many levels" not in err


def test_a_results_folder_through_a_link_to_nothing_leads_nowhere(inputs, capsys):
    """`sweep --out gone/d` with gone -> missing said 'cannot create the results folder
    (File exists)'."""
    os.symlink("missing", inputs / "gone")
    err = one_line_error(capsys, ["sweep", "s.toml", "--out", "gone/d"])
    assert err == f"ckptbench: error: --out gone/d: gone {NOWHERE}\n"


# ----------------------------------------------- (3) --dry-run --dask without distributed

#: On PYTHONPATH: ``distributed`` cannot be found, as where it is not installed.
HIDE_DISTRIBUTED = """\
import sys

class _Hide:
    def find_spec(self, name, path=None, target=None):
        if name == "distributed" or name.startswith("distributed."):
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None

sys.meta_path.insert(0, _Hide())
"""
NEEDS = "ckptbench: error: --dask needs the optional dependency: pip install 'ckptbench[dask]'"


@pytest.mark.parametrize("dry_run", [True, False], ids=["dry-run", "sweep"])
def test_a_dry_run_says_distributed_is_missing_as_the_sweep_does(inputs, tmp_path, dry_run):
    """`sweep --dry-run --dask tcp://127.0.0.1:1` without distributed showed its plan and
    exited 0; the sweep itself refuses with the install line. Both say it now."""
    hide = tmp_path / "hide"
    hide.mkdir()
    (hide / "sitecustomize.py").write_text(HIDE_DISTRIBUTED)
    argv = ["sweep", "s.toml", "--out", "d", "--dask", "tcp://127.0.0.1:1"]
    proc = subprocess.run(
        [sys.executable, "-m", "ckptbench", *argv, *(["--dry-run"] if dry_run else [])],
        capture_output=True, text=True, cwd=inputs, env=_env(PYTHONPATH=str(hide)),
        stdin=subprocess.DEVNULL,
    )  # fmt: skip
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert proc.stderr.splitlines()[-1] == NEEDS, proc.stderr
    assert not (inputs / "d").exists()


# ---------------------------------------------------- (4) one duration writer, with days


def test_the_progress_line_says_days_as_every_duration_does():
    """The running ETA said '72.0 h' where every other duration says '3 d' (one writer now:
    results.units.duration_text, which render.format.fmt_duration says too)."""
    from ckptbench.render.format import fmt_duration
    from ckptbench.results.units import duration_text
    from ckptbench.sweep.progress import SweepProgress

    line = SweepProgress("cell-start", CI_CASE, 0, 4, 10.0, 3 * 86400 + 4 * 3600).line()
    assert line.endswith(", ETA 3 d 4 h"), line
    years = SweepProgress("cell-start", CI_CASE, 0, 4, 10.0, 2.5 * 365.25 * 86400).line()
    assert years.endswith(", ETA 2.5 years"), years
    for seconds in (0.2, 45, 270, 3900, 3 * 86400, 1e12):
        assert fmt_duration(seconds) == duration_text(seconds)
    assert fmt_duration(None) == "-"
