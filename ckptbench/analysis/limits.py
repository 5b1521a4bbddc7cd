"""Where ``ckptbench check``'s limits come from, said before its verdicts: the ``[expect]``
table (a ``--config`` file, or the copy of the sweep's config its manifest recorded), the
memory and time rules of a reference gate, and a warning where the config file on disk no
longer matches that copy or no longer loads (the gate uses the copy)."""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from ckptbench.analysis.stats import percent_text
from ckptbench.results.readonce import ReadOnce
from ckptbench.results.store import MANIFEST_NAME, ManifestFiles
from ckptbench.results.units import size_text
from ckptbench.sweep.config import ConfigError, SweepConfig, load_config

__all__ = ["ConfigFiles", "config_sources", "limit_sources", "sweep_configs", "time_interval_words"]


class ConfigFiles:
    """The sweep config files one ``check`` reads, each parsed once (by its path as given):
    the ``--config`` file, and the files its sweeps ran from (their names compared with the
    manifests', their ``[expect]`` with the copies). A file that does not load raises the
    same error each time it is asked for. Beside them, ``manifests``: the sweep manifests
    the same check reads, each read once (``results.store.ManifestFiles``)."""

    def __init__(self) -> None:
        self._once: ReadOnce[SweepConfig] = ReadOnce(load_config, ConfigError)
        self.manifests = ManifestFiles()

    def load(self, path: str | Path) -> SweepConfig:
        return self._once.get(path if isinstance(path, Path) else Path(path))  # as typed


def sweep_configs(
    paths: Sequence[str | Path], manifests: ManifestFiles | None = None
) -> list[tuple[Path, dict[str, Any]]]:
    """(manifest path, its recorded config) for the sweep folders or manifests in ``paths``
    (``manifests``: each read once; a new reader where None)."""
    manifests = manifests or ManifestFiles()
    out = []
    for raw in paths:
        p = Path(raw)
        # os.path's tests: a name too long is no folder (pathlib's raised OSError, a traceback)
        manifest = p / MANIFEST_NAME if os.path.isdir(p) else p
        if manifest.name != MANIFEST_NAME or not os.path.isfile(manifest):
            continue
        data = manifests.read(manifest) or {}
        if isinstance(data.get("config"), dict):
            out.append((manifest, data["config"]))
    return out


def recorded_config(
    manifest: Path, recorded: dict[str, Any], configs: ConfigFiles | None = None
) -> Path | None:
    """The config file a sweep ran from, where it still exists: found from the manifest's
    folder (``path_from_folder``), or for a manifest written before that, as its path was
    typed. A file of that path whose sweep has another name is not it (a ``small.toml``
    where `check` runs is no sweep's config but its own). ``configs``: the files already
    read (a new reader where None)."""
    relative = recorded.get("path_from_folder")
    if isinstance(relative, str) and relative:
        path = Path(os.path.normpath(manifest.parent / relative))  # 'ci.toml', not 'out/../'
    else:
        path = Path(str(recorded.get("source") or ""))
    if not path.name or not path.is_file():
        return None
    try:
        named = (configs or ConfigFiles()).load(path).name
    except (OSError, ValueError):
        return path  # it no longer loads: said by limit_sources
    return path if named == recorded.get("name") else None


def config_sources(
    paths: Sequence[str | Path], configs: ConfigFiles | None = None
) -> tuple[Path, ...]:
    """The config files the sweeps in ``paths`` were run from, where they still exist (the
    gate reads them to compare with the manifests' copies: inputs of ``check``), read
    through ``configs`` where given (``check`` passes the reader its gate then uses)."""
    configs = configs or ConfigFiles()
    found = (recorded_config(m, recorded, configs)
             for m, recorded in sweep_configs(paths, configs.manifests))  # fmt: skip
    return tuple(dict.fromkeys(p for p in found if p is not None))


def _expect_diff(recorded: dict[str, Any], config: SweepConfig) -> list[str]:
    """The [expect] values in which a config file differs from a manifest's copy of it."""
    now = {"*": config.expect.as_dict()} | {
        k: v.as_dict() for k, v in config.expect_by_strategy.items()
    }
    then = {"*": recorded.get("expect") or {}} | dict(recorded.get("expect_by_strategy") or {})
    diffs = []
    for table in sorted(set(now) | set(then), key=lambda k: (k != "*", k)):
        a, b = then.get(table) or {}, now.get(table) or {}
        where = "" if table == "*" else f"[{table}] "
        for name in sorted(set(a) | set(b)):
            if a.get(name) != b.get(name):
                diffs.append(
                    f"{where}{name} {b.get(name)!r} in the file, {a.get(name)!r} in the copy"
                )
    return diffs


#: How the time gate's interval of new/old is taken (``analysis.stats.time_change``), as
#: compare's legend says it (``render.legends.TIME_METHODS``): over the worker processes
#: where either side has two or more (a 95% interval), from the iterations with one process
#: a side (95% for their noise alone, blind to a whole process running slow).
_PROCESSES = "Welch's t, or Student's pooled-variance t where one side has a single process"
_ITERATIONS = (
    "Bauer's rank interval, or Student's t on the log times): 95% for the iterations' noise "
    "alone, not the spread between processes"
)
_TIME_INTERVALS = {
    (True,): f"95% over the worker processes ({_PROCESSES})",
    (False,): f"with one worker process a side, from its iterations ({_ITERATIONS}",
    (False, True): f"95% over the worker processes where either side has two or more "
    f"({_PROCESSES}); with one a side, from its iterations ({_ITERATIONS}",
}


def time_interval_words(settings: Mapping[str, Any]) -> str:
    """How the time gate's interval of new/old was taken, as its time lines took it
    (``settings['time_by_process']``; none compared: both ways, each where it applies)."""
    methods = tuple(sorted(set(settings.get("time_by_process") or ()))) or (False, True)
    return _TIME_INTERVALS[methods]


def limit_sources(
    results: Sequence[str | Path],
    config: str | Path | None,
    has_expect: bool,
    settings: Mapping[str, Any],
    configs: ConfigFiles | None = None,
) -> tuple[str, ...]:
    """Where the gate's limits come from, said before the verdicts: the [expect] table (a
    --config file, or the copy of the sweep's config recorded in its manifest) and the memory
    and time rules (``settings``: the gate report's); a warning when the config file on disk
    no longer matches that copy (the gate uses the copy: editing the file alone changes
    nothing) or no longer loads. ``configs``: the files already read (each is parsed once)."""
    configs = configs or ConfigFiles()
    out = []
    if config is not None:
        out.append(f"limits: [expect] from --config {config}")
    elif has_expect:
        for manifest, recorded in sweep_configs(results, configs.manifests):
            source = recorded.get("source") or "its config"
            out.append(
                f"limits: [expect] from {manifest}, the copy of {source} made when the sweep "
                "ran (--config FILE gates on a file instead)"
            )
            path = recorded_config(manifest, recorded, configs)
            if path is None:
                continue
            try:
                diffs = _expect_diff(recorded, configs.load(path))
            except (OSError, ValueError) as err:
                out.append(
                    f"warning: {path} on disk no longer loads ({err}); the gate uses the "
                    "copy made when the sweep ran"
                )
                continue
            if diffs:
                out.append(
                    f"warning: {path} on disk differs from that copy ({'; '.join(diffs)}); "
                    f"the gate uses the copy: pass --config {path} to gate on the file"
                )
    s = settings
    if s.get("reference"):
        time_rule = (
            f"time may not grow beyond +{percent_text(s['time_tolerance'])} "
            f"(the interval of new/old: {time_interval_words(s)})"
            if s.get("time_tolerance")
            else "time not gated"
        )
        out.append(
            f"limits: memory may grow by {percent_text(s['memory_tolerance'])} of the reference or "
            f"{size_text(s['memory_floor_bytes'])}, whichever is larger; {time_rule}"
        )
    return tuple(out)
