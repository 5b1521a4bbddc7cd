"""The reports of ``run``, ``check`` and ``plan`` (``compare``'s is
:func:`ckptbench.render.compare.compare_report`): what each command shows, as a
:class:`~ckptbench.render.formats.model.Report` any format of the registry renders. Each
``*_SECTIONS`` names the section kinds the report is made of, for ``--format``'s choices."""

from __future__ import annotations

from typing import Any

from ckptbench.render.formats.model import Data, Prose, Report, TableSection, Verdicts
from ckptbench.render.layers import action_records, action_table, layer_records, layer_table
from ckptbench.render.run import explain_lines, headline, run_table
from ckptbench.render.schedule import plan_table
from ckptbench.render.table import Column, Table
from ckptbench.render.trace import trace_sections
from ckptbench.results.schema import RunResult, result_to_dict

__all__ = [
    "CHECK_SECTIONS",
    "PLAN_SECTIONS",
    "RUN_SECTIONS",
    "check_report",
    "plan_report",
    "run_report",
]

RUN_SECTIONS = (TableSection, Prose, Data)
CHECK_SECTIONS = (Verdicts,)
PLAN_SECTIONS = (TableSection, Data)


def run_report(result: RunResult, *, quiet: bool = False) -> Report:
    """The run table, the headline, the explanations (not when ``quiet``) and the result
    document (``--format json``, as ``run --json`` has always printed)."""
    lines = () if quiet else tuple(explain_lines(result))
    sections = [TableSection(run_table(result)), Prose((headline(result),))]
    if lines:
        sections.append(Prose(lines))
    sections += trace_sections(result)
    traces = tuple(s.table for s in sections if isinstance(s, TableSection))[1:]
    data = Data(result_to_dict(result), rows=(_mode_rows(result), *traces))
    return Report(f"ckptbench run — {result.case.key}", (*sections, data))


def _mode_rows(result: RunResult) -> Table:
    """One row per (round-pooled) mode, raw numbers: ``read_results``' tidy columns."""
    from ckptbench.frame import tidy_records

    records = tuple(tidy_records([result]))
    keys = list(dict.fromkeys(k for r in records for k in r))
    return Table("modes", tuple(Column(k) for k in keys), records)


def check_report(gate: Any, *, quiet: bool = False) -> Report:
    """The gate's verdicts (:class:`~ckptbench.analysis.gate.GateReport`)."""
    return Report("ckptbench check", (Verdicts(gate, quiet=quiet),))


def plan_report(
    rows: list[dict[str, Any]], costs: Any, doc: Any, steps: int, budget: int,
    *, plan: Any = None, layers: Any = None, measured: dict[str, Any] | None = None,
    actions: Any = None,
) -> Report:  # fmt: skip
    """The plan table and its document (costs, budget and rows: ``plan --format json``);
    given the optimal ``plan`` (per-step costs: a layer chain), also its per-layer table
    (``layers`` names them) and, in the document, ``plan`` (its summary less the costs)
    and ``layers`` (one record per layer). ``measured``: how the costs were measured (the
    worker's ``dtype``, ``executor``, ``taped_method``, ``timing``; None: read from a file),
    said in the title and kept in the document. ``actions``: the optimal plan whose every
    action ``plan --actions`` lists (the document's ``actions``)."""
    how = ""
    if measured:
        through = measured.get("executor")
        how = ", ".join(
            x for x in (measured.get("dtype"), through and f"through the {through} executor") if x
        )
    sections = [TableSection(plan_table(rows, costs, steps, budget, how))]
    data = {"costs": doc, "budget_bytes": budget, "rows": rows}
    if measured:
        data["measured"] = dict(measured)
    if plan is not None:
        per_layer = layer_table(plan, layers)  # markdown/HTML: its title as the heading
        sections.append(TableSection(per_layer, heading=per_layer.title))
        data["plan"] = {  # the per-step lists are the layers' table's
            k: v for k, v in plan.summary().items() if k not in ("costs", "step_advances")
        }
        data["layers"] = layer_records(plan, layers)
    if actions is not None:
        listed = action_table(actions)
        sections.append(TableSection(listed, heading=listed.title))
        data["actions"] = action_records(actions)
    return Report("ckptbench plan", (*sections, Data(data)))
