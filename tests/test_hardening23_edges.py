"""The twenty-third audit, of edges: a ``--dask`` scheme that cannot be used from here
(``ucx://`` without distributed-ucxx, ``tls://`` without Dask's TLS settings) said in
Dask's own words ('TypeError: Can't instantiate abstract class UCXConnector') or not at all
by ``--dry-run``; an input file named with a trailing '/' read as the file; a symbolic
link that leads nowhere, given as an input, read as 'no such file or folder'; a closed
stdout (``>&-``) ending in exit 0 with the output lost; ``run --costs`` with a strategy
that plans nothing measured with a note where ``--budget`` is refused. Synthetic results
and the fake worker; nothing here is timed."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from _cli import one_line_error, run_cli
from _edges import NOWHERE, TINY, write_inputs
from _fake import FAKE, use_fake_worker
from _synthetic import CI_CASE, make_result

from ckptbench.results.schema import save_result

PLUGIN = "from ckptbench.workloads.rnn import rnn\n\ndef make():\n    return rnn(hidden=8)\n"


@pytest.fixture(autouse=True)
def _no_step_summary(monkeypatch):
    monkeypatch.delenv("GITHUB_STEP_SUMMARY", raising=False)


@pytest.fixture
def inputs(tmp_path, monkeypatch):
    """A result, a costs file and a sweep config in ``tmp_path``, the current folder."""
    monkeypatch.chdir(tmp_path)
    return write_inputs(tmp_path, "edges")


# ------------------------------------------------------------- (1) --dask schemes


@pytest.mark.parametrize("dry_run", [False, True])
@pytest.mark.parametrize(
    ("address", "said"),
    [
        ("ucx://127.0.0.1:1", "the ucx scheme needs distributed-ucxx, which is not installed"),
        ("tls://127.0.0.1:1", "tls needs Dask's TLS settings, and none are set"),
    ],
)
def test_a_dask_scheme_that_cannot_be_used_is_one_line(
    inputs, capsys, monkeypatch, address, said, dry_run
):
    """`sweep --dask ucx://...` said 'cannot reach Dask scheduler ucx://127.0.0.1:1:
    TypeError: Can't instantiate abstract class UCXConnector with abstract method connect'
    (tls://: 'TLS expects a `ssl_context` argument ... Instead got None'), and --dry-run
    said nothing and exited 0. Now both refuse it by its scheme, reaching nothing."""
    if address.startswith("ucx") and any(
        importlib.util.find_spec(m) for m in ("distributed_ucxx", "ucp")
    ):
        pytest.skip("ucx is installed here")
    for var in [v for v in os.environ if v.startswith("DASK_DISTRIBUTED__COMM__TLS")]:
        monkeypatch.delenv(var)
    argv = ["sweep", "s.toml", "--out", "o", "--dask", address, "--yes"]
    err = one_line_error(capsys, [*argv, "--dry-run"] if dry_run else argv)
    assert err == f"ckptbench: error: --dask {address!r}: {said} ({err.split(' (', 1)[1]}"
    assert "TypeError" not in err and not (inputs / "o").exists()


# ------------------------------------------------- (2) a file's name followed by '/'


FILE_INPUTS = [
    ["compare", "r.json/"],
    ["check", "r.json/"],
    ["compare", "r.json", "--against", "r.json/"],
    ["check", "r.json", "--against", "r.json//"],
    ["check", "r.json", "--config", "s.toml/"],
    ["sweep", "s.toml/", "--dry-run"],
    ["plan", "--model", "rnn", "--steps", "20", "--budget", "1MiB", "--costs", "c.json/"],
    ["run", *TINY, "--strategy", "optimal", "--budget", "1MiB", "--costs", "c.json/"],
]


INPUT_IDS = ["compare", "check", "compare-against", "check-against", "check-config",
             "sweep", "plan-costs", "run-costs"]  # fmt: skip


@pytest.mark.parametrize("argv", FILE_INPUTS, ids=INPUT_IDS)
def test_a_file_named_with_a_trailing_slash_is_not_a_folder(inputs, capsys, argv):
    """`compare r.json/` read r.json (pathlib drops the '/'), where the shell and every Unix
    tool say 'Not a directory'; `check --config s.toml/` read the config."""
    named = next(a for a in argv if a.endswith("/"))
    err = one_line_error(capsys, argv)
    assert f"{named!r} is not a folder: a file's name followed by '/'" in err, err
    assert f"(name the file {named.rstrip('/')!r})" in err


def test_a_plugin_file_named_with_a_trailing_slash_is_not_a_folder(inputs, capsys):
    """`run --model plug.py/:make` loaded plug.py, as `compare r.json/` read r.json. (The
    plug-in check's real worker says it, before anything is measured.)"""
    (inputs / "plug.py").write_text(PLUGIN)
    argv = ["run", *TINY[2:], "--model", "plug.py/:make", "--out", "x.json"]
    err = one_line_error(capsys, argv)
    assert err == (
        "ckptbench: error: --model: workload file 'plug.py/': is not a folder: a file's name "
        "followed by '/'\n"
    )


def test_a_folder_or_nothing_named_with_a_slash_is_read_as_before(inputs, capsys):
    """Only a file's name followed by '/' is refused so: a folder with one is a folder, and
    a missing name still says so as typed."""
    (inputs / "d").mkdir()
    save_result(make_result(CI_CASE, seed=2), inputs / "d" / "r.json")
    assert one_line_error(capsys, ["compare", "nope/"]).endswith("nope/: no such file or folder\n")
    code, _, err = run_cli(capsys, ["compare", "d/"])
    assert code == 0 and "Traceback" not in err


# ------------------------------------------ (3) a symbolic link that leads nowhere


LINK_INPUTS = [
    (["compare", "{}"], "{}"),
    (["check", "{}"], "{}"),
    (["compare", "r.json", "--against", "{}"], "{}"),
    (["check", "r.json", "--config", "{}"], "{}"),
    (["sweep", "{}", "--dry-run"], "{}"),
    (
        ["plan", "--model", "rnn", "--steps", "20", "--budget", "1MiB", "--costs", "{}"],
        "--costs {}",
    ),
    (["run", *TINY, "--strategy", "optimal", "--budget", "1MiB", "--costs", "{}"], "--costs {}"),
]


@pytest.mark.parametrize("link", ["loop", "gone"])
@pytest.mark.parametrize(("argv", "named"), LINK_INPUTS, ids=INPUT_IDS[:3] + INPUT_IDS[4:])
def test_an_input_link_that_leads_nowhere_says_so(inputs, capsys, argv, named, link):
    """A link to itself ('loop') read 'no such file or folder' (compare, check, --against)
    or 'cannot read (Too many levels of symbolic links)' (--config, a sweep config, --costs);
    one to a missing file ('gone') 'no such file or folder'. Said now as an output's
    folder is (cli.outputs.make_folder): one helper, results.inputs.leads_nowhere."""
    os.symlink("loop", inputs / "loop")
    os.symlink("missing.json", inputs / "gone")
    err = one_line_error(capsys, [a.replace("{}", link) for a in argv])
    assert err == f"ckptbench: error: {named.replace('{}', link)}: {NOWHERE}\n"


def test_a_folder_on_the_way_that_leads_nowhere_is_named(inputs, capsys):
    os.symlink("loop", inputs / "loop")
    err = one_line_error(capsys, ["compare", "loop/r.json"])
    assert err == f"ckptbench: error: loop/r.json: loop {NOWHERE}\n"
    err = one_line_error(capsys, ["compare", "loop/"])
    assert err == f"ckptbench: error: loop/: {NOWHERE}\n"


# --------------------------------------------------------------- (4) stdout closed


CLOSED = (
    "ckptbench: error: cannot write the output (Bad file descriptor: standard output is closed)"
)
#: ``ckptbench ARGV`` with every worker the fake one (``_fake.FAKE``), as ``python -c``.
MAIN_WITH_FAKE_WORKER = (
    "import sys\n"
    "import ckptbench.measure.launch as launch\n"
    f"launch.default_worker_command = lambda: {FAKE!r}\n"
    "sys.argv[0] = 'ckptbench'\n"
    "from ckptbench.entry import main\n"
    "main()\n"
)


def _closed_stdout(argv: list[str], cwd: Path, *, fake: bool = False):
    """``ckptbench ARGV >&-`` in a real process (stdout closed, not /dev/null)."""
    head = ["-c", MAIN_WITH_FAKE_WORKER] if fake else ["-m", "ckptbench"]
    env = {k: v for k, v in os.environ.items() if not k.startswith("FAKE_")}
    return subprocess.run(
        ["bash", "-c", '"$@" >&-', "bash", sys.executable, *head, *argv],
        stdin=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, cwd=cwd, env=env,
    )  # fmt: skip


@pytest.mark.parametrize(
    "argv",
    [["schedule", "--steps", "10", "--snaps", "3"], ["compare", "r.json"], ["--help"]],
    ids=lambda a: a[0],
)
def test_a_closed_stdout_is_no_success(inputs, argv):
    """`ckptbench schedule --steps 10 --snaps 3 >&-` exited 0 saying nothing: Python made
    sys.stdout None, into which click and rich drop every write. Now one line and 74, the
    status of an output that could not be written (as `> /dev/full`)."""
    proc = _closed_stdout(argv, inputs)
    assert proc.returncode == 74, proc.stderr
    assert proc.stderr.splitlines() == [CLOSED]


def test_run_with_stdout_closed_saves_its_result_and_says_the_output_was_lost(inputs):
    """`run ... >&-` measured, saved and exited 0 with its table lost; its workers got the
    descriptor 1 that the next file opened would take (/dev/null now)."""
    proc = _closed_stdout(["run", *TINY, "--out", "x.json"], inputs, fake=True)
    assert proc.returncode == 74, proc.stderr
    assert proc.stderr.splitlines()[-1] == CLOSED and "Traceback" not in proc.stderr
    assert json.loads((inputs / "x.json").read_text())["case"]["steps"] == 20


def test_a_reader_that_leaves_early_is_still_quiet(inputs):
    """`schedule --actions | head -1`: 141 and nothing said, as before."""
    proc = subprocess.run(
        ["bash", "-c", '"$@" | head -1; exit "${PIPESTATUS[0]}"', "bash", sys.executable, "-m",
         "ckptbench", "schedule", "--steps", "2000", "--snaps", "3", "--actions"],
        capture_output=True, text=True, cwd=inputs,
    )  # fmt: skip
    assert proc.returncode == 141 and proc.stderr == ""
    assert len(proc.stdout.splitlines()) == 1


# ------------------------------------------- (5) --costs with a strategy that plans nothing


@pytest.mark.parametrize("option", [["--costs", "c.json"], ["--budget", "1MiB"]])
@pytest.mark.parametrize("strategy", ["revolve", "store-all"])
def test_an_option_only_optimal_uses_is_refused_alike(inputs, capsys, monkeypatch, option,
                                                       strategy):  # fmt: skip
    """`run --strategy revolve --budget 1MiB` was refused, `--costs c.json` measured revolve
    with a note that the file was ignored: both options belong to the planner only, and a
    user who gave one most likely forgot `--strategy optimal`. Refused alike now."""
    use_fake_worker(monkeypatch)
    err = one_line_error(capsys, ["run", *TINY, "--strategy", strategy, *option, "--out", "x.json"])
    what = "a costs file (--costs)" if option[0] == "--costs" else "a byte budget (--budget)"
    assert err == f"ckptbench: error: {what} is only used by strategy 'optimal', not {strategy!r}\n"
    assert not (inputs / "x.json").exists()


# ------------------------------------------------ (1b) tls:// with Dask's TLS settings

#: A LocalCluster (one in-process worker) that speaks only TLS, its certificate files the
#: arguments; prints its address and runs until its stdin is closed.
TLS_CLUSTER = """\
import sys
from distributed import LocalCluster
from distributed.security import Security
cert, key = sys.argv[1:3]
sec = Security(tls_ca_file=cert, require_encryption=True, **{
    f"tls_{role}_{kind}": path for role in ("scheduler", "worker", "client")
    for kind, path in (("cert", cert), ("key", key))})
with LocalCluster(n_workers=1, threads_per_worker=1, processes=False, host="127.0.0.1",
                  protocol="tls", security=sec, dashboard_address=None) as cluster:
    print(cluster.scheduler_address, flush=True)
    sys.stdin.read()
"""


@pytest.mark.slow
def test_a_tls_scheduler_is_reached_with_dasks_tls_settings(inputs):
    """With Dask's TLS settings given, `--dask tls://...` still said 'TLS expects a
    `ssl_context` argument ... Instead got None': ckptbench's handshake before the Client
    passed no security settings. It reaches the scheduler and measures the cell now."""
    pytest.importorskip("distributed")
    if subprocess.run(["openssl", "version"], capture_output=True).returncode != 0:
        pytest.skip("needs openssl to make a certificate")
    cert, key = inputs / "cert.pem", inputs / "key.pem"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout",
                    str(key), "-out", str(cert), "-days", "2", "-subj", "/CN=localhost"],
                   check=True, capture_output=True)  # fmt: skip
    server = subprocess.Popen(
        [sys.executable, "-c", TLS_CLUSTER, str(cert), str(key)],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
    )  # fmt: skip
    try:
        address = server.stdout.readline().strip()  # type: ignore[union-attr]
        assert address.startswith("tls://"), "the TLS cluster did not start"
        env = {**os.environ, "DASK_DISTRIBUTED__COMM__TLS__CA_FILE": str(cert),
               "DASK_DISTRIBUTED__COMM__TLS__CLIENT__CERT": str(cert),
               "DASK_DISTRIBUTED__COMM__TLS__CLIENT__KEY": str(key)}  # fmt: skip
        proc = subprocess.run(
            [sys.executable, "-m", "ckptbench", "sweep", "s.toml", "--out", "o", "--dask",
             address, "--yes"],
            cwd=inputs, env=env, capture_output=True, text=True, timeout=300,
        )  # fmt: skip
    finally:
        server.stdin.close()  # type: ignore[union-attr]
        try:
            server.wait(60)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()
    assert proc.returncode == 0, proc.stderr
    assert "1 measured" in proc.stdout
