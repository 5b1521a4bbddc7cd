"""A new user's first ten minutes (audit at e1bb117): a failure's install hint printed as
it was written, where a result goes next, what the compare table's columns mean, and a
top-level --help that maps the commands."""

from __future__ import annotations

import io
from dataclasses import replace

from rich.console import Console

from ckptbench.cli.run_steps import report_outcome
from ckptbench.results.schema import Mode, Status
from tests._synthetic import make_result

HINT = "TorchMissingError: --backend torch needs PyTorch; pip install 'ckptbench[torch]'"


def _failed(error: str):
    result = make_result(status={"checkpointed": Status.FAILED})
    modes = tuple(
        replace(m, error=error) if m.mode is Mode.CHECKPOINTED else m for m in result.modes
    )
    return replace(result, modes=modes)


def test_a_failure_line_keeps_its_brackets(capsys):
    """rich read '[torch]' as a style and dropped it (the hint said `pip install
    'ckptbench'`), and a '[/x]' in a plug-in's error raised MarkupError (a traceback)."""
    from ckptbench.render.console import stderr_console

    code = report_outcome(_failed(f"{HINT} [/x] [expect]"), (), stderr_console())
    err = capsys.readouterr().err
    assert code == 1
    assert "pip install 'ckptbench[torch]' [/x] [expect]" in err


def test_report_prose_keeps_its_brackets():
    """A report's prose lines (the headline, a plug-in's name) print as written."""
    from ckptbench.render.formats.model import Prose, Report
    from ckptbench.render.formats.text import show_text

    buf = io.StringIO()
    show_text(Report("r", (Prose(("plugins/[v2]/gru.py:make [/b] 1.3x [1.2, 1.4]",)),)),
              Console(file=buf, width=120))  # fmt: skip
    assert "plugins/[v2]/gru.py:make [/b] 1.3x [1.2, 1.4]" in buf.getvalue()
