"""The numbers of ckptbench's reports: summaries of one result, statistics of before/after
samples and the pairing of current with reference cells. numpy and the stdlib (scipy is
imported lazily by the intervals); nothing here formats, prints or reads files
(docs/architecture.md, "analysis").
"""

from __future__ import annotations

from ckptbench.analysis.pairing import (
    RUN_SETTINGS,
    CellComparison,
    Comparison,
    ModeComparison,
    Pairing,
    PooledCell,
    case_identity,
    compare,
    compare_cells,
    differing_fields,
    field_value,
    pair,
    pool_results,
    settings_notes,
)
from ckptbench.analysis.stats import (
    MEMORY_FLOOR_BYTES,
    MEMORY_TOLERANCE,
    MIN_EFFECT,
    MemoryDelta,
    TimeChange,
    memory_delta,
    time_change,
)
from ckptbench.analysis.summary import (
    BUSY_CPU_SHARE,
    Spread,
    effective_snaps,
    mode_peak_bytes,
    mode_time_s,
    ratio,
    spread,
)

__all__ = [
    "BUSY_CPU_SHARE",
    "MEMORY_FLOOR_BYTES",
    "MEMORY_TOLERANCE",
    "MIN_EFFECT",
    "RUN_SETTINGS",
    "CellComparison",
    "Comparison",
    "MemoryDelta",
    "ModeComparison",
    "Pairing",
    "PooledCell",
    "Spread",
    "TimeChange",
    "case_identity",
    "compare",
    "compare_cells",
    "differing_fields",
    "effective_snaps",
    "field_value",
    "memory_delta",
    "mode_peak_bytes",
    "mode_time_s",
    "pair",
    "pool_results",
    "ratio",
    "settings_notes",
    "spread",
    "time_change",
]
