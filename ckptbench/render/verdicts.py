"""The gate's verdicts (a :class:`~ckptbench.analysis.gate.GateReport`) as plain text for a
terminal, markdown for a CI job summary, and JUnit XML for CI test reports."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET

from ckptbench.analysis.cellchecks import GateLine
from ckptbench.analysis.gate import GateReport
from ckptbench.analysis.limits import time_interval_words
from ckptbench.analysis.stats import percent_text
from ckptbench.render.format import fmt_size
from ckptbench.render.table import md_cell, md_text

__all__ = ["check_junit", "check_markdown", "check_text", "gate_rule"]


#: Characters XML 1.0 cannot hold (C0 controls but tab, newline and return; lone
#: surrogates; U+FFFE/U+FFFF): a worker's stderr tail in a failure's numbers could carry one.
_NOT_XML = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ud800-\udfff\ufffe\uffff]")


def _xml(text: str) -> str:
    """``text`` as XML can hold it: each character it cannot, written as ``\\xNN``."""
    return _NOT_XML.sub(lambda m: f"\\x{ord(m.group()):02x}", text)


def _cell(line: GateLine) -> str:
    return line.key + (f"@{line.host}" if line.host else "")


def check_text(report: GateReport, *, quiet: bool = False) -> str:
    """The headline, then one line per check (failures first; only failures when
    ``quiet``), then the notes."""
    out = [report.headline, *report.sources]
    shown = report.failures if quiet else report.lines
    for line in sorted(shown, key=lambda line: line.passed):
        word = "ok  " if line.passed else "FAIL"
        out.append(f"{word} {_cell(line)} {line.check}: {line.detail}")
    out.extend(f"note: {n}" for n in report.notes)
    return "\n".join(out) + "\n"


def gate_rule(report: GateReport) -> str:
    """The gate's settings in one sentence ('' without a reference: with none, no memory or
    time was gated, as the text's 'limits:' lines say)."""
    s = report.settings
    if not s or not s.get("reference"):
        return ""
    time_rule = (
        f"time gated at +{percent_text(s['time_tolerance'])}: a mode fails when the interval "
        f"of new/old lies wholly above it ({time_interval_words(s)})"
        if s.get("time_tolerance")
        else "time not gated"
    )
    floor = fmt_size(s["memory_floor_bytes"])
    return (
        f"Memory tolerance {percent_text(s['memory_tolerance'])} with a {floor} floor; {time_rule}."
    )


def check_markdown(report: GateReport) -> str:
    """A CI job summary: headline, failures with numbers, every check folded."""

    def row(line: GateLine) -> str:
        mark = "pass" if line.passed else "**FAIL**"
        cell = f"`{line.key}`" + (f" ({md_cell(line.host)})" if line.host else "")
        return f"| {mark} | {cell} | {line.check} | {md_cell(line.detail)} |"

    head = "| result | cell | check | numbers |\n|---|---|---|---|"
    out = [f"### {report.headline}", ""]
    if report.sources:
        out += [f"- {md_text(line)}" for line in report.sources] + [""]
    if report.failures:
        out += ["#### Failures", "", head, *(row(f) for f in report.failures), ""]
    out += ["<details><summary>All checks</summary>", "", head]
    out += [row(line) for line in report.lines]
    out += ["", "</details>", ""]
    if rule := gate_rule(report):
        out.append(rule)
    out += [f"- {md_text(n)}" for n in report.notes]
    return "\n".join(out).rstrip() + "\n"


def check_junit(report: GateReport) -> str:
    """JUnit XML: one testsuite per cell, one testcase per check, a failure element with
    the numbers for each failed check; the notes go to the suite's system-out."""
    root = ET.Element(
        "testsuites",
        name="ckptbench check",
        tests=str(len(report.lines)),
        failures=str(len(report.failures)),
    )
    for key, host in dict.fromkeys((line.key, line.host) for line in report.lines):
        lines = [line for line in report.lines if (line.key, line.host) == (key, host)]
        name = _xml(key + (f"@{host}" if host else ""))
        suite = ET.SubElement(
            root,
            "testsuite",
            name=name,
            tests=str(len(lines)),
            failures=str(sum(not line.passed for line in lines)),
            errors="0",
        )
        for line in lines:
            case = ET.SubElement(suite, "testcase", classname=name, name=line.check)
            detail = _xml(line.detail)
            if line.passed:
                ET.SubElement(case, "system-out").text = detail
            else:
                fail = ET.SubElement(case, "failure", message=detail, type=line.check)
                fail.text = f"{name} {line.check}: {detail}"
    if report.notes or gate_rule(report) or report.sources:
        out = ET.SubElement(root, "system-out")
        out.text = _xml("\n".join([*report.sources, gate_rule(report), *report.notes]).strip())
    ET.indent(root)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(root, "unicode") + "\n"
