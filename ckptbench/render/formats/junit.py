"""JUnit XML for CI test reports: one testcase per check of the gate."""

from __future__ import annotations

from ckptbench.render.formats import Format
from ckptbench.render.formats.model import Report, Verdicts


def render_junit(report: Report, width: int | None = None) -> str:
    from ckptbench.render.verdicts import check_junit

    verdicts = report.of((Verdicts,))
    if not verdicts:  # one line, never an IndexError
        raise ValueError("--format junit writes a gate's verdicts: use it with ckptbench check")
    return check_junit(verdicts[0].report)


FORMAT = Format(
    "junit", ".xml", render_junit, (Verdicts,), help="JUnit XML, one testcase per check"
)
