"""docs/plugins.md: its three examples are the files under docs/examples/, verbatim, and each
runs through ``ckptbench run`` as written (tiny sizes, real workers, every mode ok)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from ckptbench.cli import main

ROOT = Path(__file__).resolve().parents[1]
DOC = ROOT / "docs" / "plugins.md"
EXAMPLES = {
    "autograd_rnn.py": ("autograd", []),
    "torch_gru.py": ("torch", [pytest.mark.torch]),
    "jax_equinox_gru.py": ("jax", [pytest.mark.jax]),
}


def _blocks() -> dict[str, str]:
    """``<!-- docs/examples/NAME -->`` followed by a python block: NAME -> the block."""
    text = DOC.read_text()
    found = re.findall(r"<!-- docs/examples/(\S+) -->\n```python\n(.*?)```\n", text, re.S)
    return dict(found)


def test_every_example_in_the_doc_is_its_file_verbatim():
    blocks = _blocks()
    assert set(blocks) == set(EXAMPLES)
    for name, code in blocks.items():
        assert code == (ROOT / "docs" / "examples" / name).read_text(), name
    for name, (backend, _) in EXAMPLES.items():
        flag = "" if backend == "autograd" else f"--backend {backend} "
        assert f"ckptbench run {flag}--model docs/examples/{name}:make" in DOC.read_text()


@pytest.mark.slow
@pytest.mark.parametrize(
    "name", [pytest.param(n, marks=marks) for n, (_, marks) in EXAMPLES.items()]
)
def test_each_example_runs_as_written(name, tmp_path, monkeypatch, capsys):
    backend = EXAMPLES[name][0]
    pytest.importorskip({"autograd": "autograd", "torch": "torch", "jax": "equinox"}[backend])
    monkeypatch.chdir(ROOT)
    out = tmp_path / "r.json"
    argv = ["run", "--backend", backend, "--model", f"docs/examples/{name}:make",
            "--steps", "12", "--snaps", "3", "--hidden", "8", "--batch", "2", "--input", "4",
            "--rounds", "1", "--warmup", "0", "--repeats", "1", "--precision", "off",
            "--out", str(out), "-q"]  # fmt: skip
    with pytest.raises(SystemExit) as exc:
        main(argv)
    err = capsys.readouterr().err
    assert exc.value.code == 0, err
    doc = json.loads(out.read_text())
    assert [m["status"] for m in doc["modes"]] == ["ok"] * 3
    assert doc["environment"]["plugin"]["path"] == f"docs/examples/{name}"
