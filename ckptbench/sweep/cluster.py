"""Reaching a Dask cluster for ``ckptbench sweep --dask``, before anything is written.

:func:`connect` parses the address (:func:`parse_address`, without importing
``distributed``), reaches the scheduler within :data:`CONNECT_TIMEOUT_S` (and waits as long
for a first worker), and asks every worker in a small task that needs only the standard
library (:data:`PROBE`) for its ckptbench, Python and backend packages
(:class:`WorkerInfo`); a worker that cannot run the sweep's cells is refused by name
(:class:`DaskError`). :class:`Cluster` holds the client for the sweep (``sweep.dask``) and
probes workers that join later (:meth:`Cluster.admit`). distributed's own log lines are
kept quiet while it is connected: the sweep reports what happens in one line each
(docs/cluster.md).
"""

from __future__ import annotations

import contextlib
import importlib.util
import logging
import re
import sys
import time
import warnings
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

import ckptbench
from ckptbench.backends import registry
from ckptbench.results.schema import Case

__all__ = [
    "CONNECT_TIMEOUT_S",
    "PROBE",
    "Cluster",
    "DaskError",
    "SchedulerLost",
    "WorkerInfo",
    "connect",
    "one_line",
    "parse_address",
    "requirements",
    "usable_address",
]

#: How long ckptbench waits for the scheduler to answer (and for a first worker) at start,
#: and for a lost scheduler to come back before the sweep ends.
CONNECT_TIMEOUT_S = 10.0
#: Where ``distributed`` is not installed: said by the sweep and its dry run alike.
NEEDS_DISTRIBUTED = "--dask needs the optional dependency: pip install 'ckptbench[dask]'"
#: ``inproc://`` is left out: it names a scheduler inside this process, which a command
#: line never has.
SCHEMES = ("tcp", "tls", "ws", "wss", "ucx")


class DaskError(ValueError):
    """The cluster cannot run the sweep (bad address, unreachable, no or unfit workers)."""


def one_line(err: BaseException) -> str:
    text = str(err).strip().splitlines()
    return f"{type(err).__name__}: {text[0]}" if text else type(err).__name__


# --------------------------------------------------------------------------- the address

_HOST_PORT = re.compile(r"^(\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9_.-]+):([0-9]{1,5})$")


def parse_address(text: str) -> str:
    """The scheduler address ``text`` as ``scheme://host:port`` (``tcp://`` when none is
    given); :class:`DaskError` (one line) when it is not an address. Imports nothing."""
    raw = text.strip()
    scheme, sep, rest = raw.partition("://")
    if not sep:
        scheme, rest = "tcp", raw
    if scheme not in SCHEMES:
        raise DaskError(
            f"--dask {text!r}: unknown scheme {scheme!r}; a scheduler address looks like "
            f"tcp://HOST:8786 (schemes: {', '.join(SCHEMES)})"
        )
    m = _HOST_PORT.match(rest.rstrip("/"))
    if m is None:
        raise DaskError(
            f"--dask {text!r}: not HOST:PORT; a scheduler address looks like tcp://HOST:8786"
        )
    port = int(m.group(2))
    if not 0 < port < 65536:
        raise DaskError(f"--dask {text!r}: port {port} is not between 1 and 65535")
    return f"{scheme}://{m.group(1)}:{port}"


def usable_address(text: str) -> str:
    """:func:`parse_address`, and :class:`DaskError` (one line) where its scheme cannot be
    used from here, said before anything is reached (``--dry-run`` too): ``ucx://`` without
    distributed-ucxx (or UCX-Py) installed, where Dask said "TypeError: Can't instantiate
    abstract class UCXConnector"; ``tls://`` without Dask's TLS settings (a CA file and a
    client certificate), which the command line cannot give, where it said "TLS expects a
    `ssl_context` argument"; and any scheme without ``distributed`` itself, which a dry run
    did not say (:data:`NEEDS_DISTRIBUTED`). Imports no ``distributed``."""
    address = parse_address(text)
    if not _installed("distributed"):
        raise DaskError(NEEDS_DISTRIBUTED)
    scheme = address.partition("://")[0]
    ucx = ("distributed_ucxx", "ucp")  # distributed >= 2025.x: its own package; before: UCX-Py
    if scheme == "ucx" and not any(importlib.util.find_spec(m) for m in ucx):
        raise DaskError(
            f"--dask {text!r}: the ucx scheme needs distributed-ucxx, which is not installed "
            "(pip install distributed-ucxx-cu12; or a tcp:// address)"
        )
    if scheme == "tls" and not _tls_settings():
        raise DaskError(
            f"--dask {text!r}: tls needs Dask's TLS settings, and none are set "
            "(distributed.comm.tls.ca-file, .client.cert and .client.key in Dask's config, "
            "e.g. DASK_DISTRIBUTED__COMM__TLS__CA_FILE=...; or a tcp:// address)"
        )
    return address


def _installed(module: str) -> bool:
    """Whether ``module`` can be imported, by its finders alone (nothing imported)."""
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):  # a finder that refuses it, a broken one in sys.modules
        return False


def _tls_settings() -> bool:
    """Whether Dask's configuration names the CA file and client certificate a TLS client
    needs (distributed.security.Security makes no TLS context without both). True where
    dask is missing: connecting says that."""
    try:
        import dask.config
    except ImportError:
        return True
    get = dask.config.get
    return bool(get("distributed.comm.tls.ca-file", None)
                and get("distributed.comm.tls.client.cert", None))  # fmt: skip


# --------------------------------------------------------------------------- the workers

#: Packages a worker reports, by import name: numpy and every registered backend's
#: ``requires`` and ``distributions``.
PACKAGES = tuple(
    dict.fromkeys(
        ("numpy", *(p for s in registry.discover() for p in (*s.requires, *s.distributions)))
    )
)

#: Evaluated on each worker by the builtin ``eval`` (``Client.run``), so it needs nothing
#: but the standard library there: a worker without ckptbench answers too.
PROBE = (
    "(lambda sys, socket, md, util: {"
    "'python': '.'.join(map(str, sys.version_info[:3])),"
    "'host': socket.gethostname(),"
    "'ckptbench': __import__('ckptbench').__version__ if util.find_spec('ckptbench') else None,"
    "'packages': {n: (next((d.version for d in md.distributions(name=n)), '?')"
    " if util.find_spec(n) else None) for n in PACKAGES}})"
    "(__import__('sys'), __import__('socket'), __import__('importlib.metadata').metadata,"
    " __import__('importlib.util').util)"
).replace("PACKAGES", repr(PACKAGES))


@dataclass(frozen=True)
class WorkerInfo:
    """What a worker said about itself (the probe)."""

    address: str
    host: str
    python: str
    ckptbench: str | None
    packages: dict[str, str | None] = field(default_factory=dict)
    error: str | None = None  # the probe did not answer (a frozen worker, a lost one)

    @classmethod
    def from_probe(cls, address: str, data: Any) -> WorkerInfo:
        if isinstance(data, BaseException) or not isinstance(data, dict):
            why = one_line(data) if isinstance(data, BaseException) else repr(data)[:80]
            return cls(address, "", "?", None, error=why)
        packages = data.get("packages")
        return cls(
            address=address,
            host=str(data.get("host") or ""),
            python=str(data.get("python") or "?"),
            ckptbench=data.get("ckptbench"),
            packages=dict(packages) if isinstance(packages, dict) else {},
        )

    def problem(self, requires: Iterable[str]) -> str | None:
        """Why this worker cannot measure cells needing the packages ``requires`` (None: it
        can): ckptbench missing or another version, another Python, a backend missing."""
        here = ckptbench.__version__
        if self.error is not None:
            return f"it did not answer ckptbench's probe ({self.error})"
        if self.ckptbench is None:
            return f"ckptbench is not installed there (pip install ckptbench=={here})"
        if self.ckptbench != here:
            return f"it has ckptbench {self.ckptbench}, this is {here}"
        mine = "{}.{}".format(*sys.version_info[:2])
        if self.python.rsplit(".", 1)[0] != mine:
            return f"it runs Python {self.python}, this is {mine}"
        missing = sorted(p for p in set(requires) if not self.packages.get(p))
        if missing:
            return f"it cannot import {', '.join(missing)}, which the sweep's cells need"
        return None


def requirements(cases: Iterable[Case]) -> set[str]:
    """The packages the cells ``cases`` need on a worker: their backends' and their
    strategies' (a peer such as equinox's loop needs its own package)."""
    from ckptbench.schedules import get_strategy

    return {
        p
        for case in cases
        for p in (*registry.spec(case.backend).requires, *get_strategy(case.strategy).requires)
    }


@contextlib.contextmanager
def _quiet_logs() -> Iterator[None]:
    """distributed logs reconnection attempts and shutdowns to stderr (a traceback when the
    scheduler dies); the sweep reports those itself, in one line."""
    names = [n for n in list(logging.root.manager.loggerDict) if n.split(".")[0] in
             ("distributed", "tornado", "asyncio")]  # fmt: skip
    loggers = [logging.getLogger(n) for n in {*names, "distributed", "tornado", "asyncio"}]
    levels = [lg.level for lg in loggers]
    for lg in loggers:
        lg.setLevel(logging.CRITICAL + 1)
    try:
        yield
    finally:
        for lg, level in zip(loggers, levels, strict=True):
            lg.setLevel(level)


class Cluster:
    """A connected client and the workers checked for one sweep (:func:`connect`)."""

    def __init__(
        self, address: str, client: Any, workers: dict[str, WorkerInfo], requires: set[str],
        timeout_s: float, quiet: contextlib.ExitStack,
    ) -> None:  # fmt: skip
        self.address = address
        self.client = client
        self.workers = workers  # checked and fit, by address
        self.refused: dict[str, str] = {}  # address -> why (workers that joined later)
        self.requires = requires
        self.timeout_s = timeout_s
        self._quiet = quiet
        self.scheduler_id: str | None = None  # the scheduler's id at connect (a restart's is new)

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self.client.close(timeout=self.timeout_s)
        self._quiet.close()

    def __enter__(self) -> Cluster:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def alive(self) -> set[str]:
        """Addresses of the workers connected now (:class:`SchedulerLost` when the
        scheduler does not answer). ``Client.nthreads()`` asks the scheduler;
        ``Client.scheduler_info()`` is not used: a background refresh can overwrite its
        cached identity with a truncated worker list, which would look like workers leaving."""
        try:
            return set(self.client.nthreads())
        except (KeyboardInterrupt, SystemExit):
            raise
        except Exception as err:  # OSError, TimeoutError, CommClosedError, a closed client
            raise SchedulerLost(one_line(err)) from None

    def restarted(self) -> bool:
        """True (once) when the scheduler at the address is not the one connected to: its id
        changed, so it was restarted, and the client reconnected to the new one (Dask then
        cancels every future the client had, and workers that lost their scheduler closed).
        :class:`SchedulerLost` when it does not answer."""
        now = self.ask_id()
        if now is None or self.scheduler_id is None or now == self.scheduler_id:
            self.scheduler_id = self.scheduler_id or now
            return False
        self.scheduler_id = now
        return True

    def ask_id(self) -> str | None:
        """The scheduler's id, asked now (None where its answer has none)."""
        try:
            try:
                info = self.client.scheduler_info(n_workers=0)  # no worker list: cheap
            except TypeError:  # a distributed before 2025 takes no n_workers
                info = self.client.scheduler_info()
        except (KeyboardInterrupt, SystemExit):
            raise
        except Exception as err:
            raise SchedulerLost(one_line(err)) from None
        got = info.get("id") if isinstance(info, dict) else None
        return got if isinstance(got, str) else None

    def probe(self, workers: list[str] | None = None) -> dict[str, WorkerInfo]:
        """Ask ``workers`` (all the scheduler knows when None) what they run, together; where
        that call does not return in time (one frozen worker holds it), each is asked alone,
        so every worker is named with its own answer or why it gave none."""
        if workers is None:
            workers = sorted(self.client.scheduler_info().get("workers", {}))
        answers = self._ask(workers)
        if all(isinstance(a, BaseException) for a in answers.values()) and len(workers) > 1:
            answers = {w: a for one in workers for w, a in self._ask([one]).items()}
        return {w: WorkerInfo.from_probe(w, answers.get(w)) for w in sorted(answers)}

    def _ask(self, workers: list[str]) -> dict[str, Any]:
        try:
            answers = self.client.sync(
                self.client._run, eval, PROBE, {}, workers=workers, on_error="return",
                callback_timeout=self.timeout_s,
            )  # fmt: skip
        except (KeyboardInterrupt, SystemExit):
            raise
        except Exception as err:
            return {w: err for w in workers}
        return {**{w: TimeoutError("no answer") for w in workers}, **answers}

    def admit(self, worker: str) -> bool:
        """A worker that joined mid-sweep: probe it; True when it may measure cells."""
        if worker in self.workers:
            return True
        if worker in self.refused:
            return False
        info = self.probe([worker]).get(worker) or WorkerInfo(worker, "", "?", None)
        why = info.problem(self.requires)
        if why is None:
            self.workers[worker] = info
            return True
        self.refused[worker] = why
        return False

    def host(self, worker: str) -> str:
        info = self.workers.get(worker)
        return info.host if info is not None else ""


class SchedulerLost(Exception):
    pass


def _handshake(address: str, timeout_s: float) -> None:
    """Dask's connection handshake with ``address``, bounded by ``timeout_s``, in a thread of
    its own (its own event loop), before a ``Client`` is made: a port that accepts
    connections but is no Dask server (an HTTP server, a silent listener) hung ``Client``
    without a limit, and a scheme that needs settings the command line cannot give left a
    half-made ``Client`` whose clean-up printed a traceback 20 s later. Dask's security
    settings are used as ``Client`` uses them (without, ``tls://`` never connected). Raises
    what connecting raised, or TimeoutError."""
    import asyncio
    import concurrent.futures

    from distributed.comm import connect as comm_connect
    from distributed.security import Security

    settings = Security().get_connection_args("client")  # TLS from Dask's config, if any

    async def shake() -> None:
        connecting = comm_connect(address, timeout=timeout_s, **settings)
        comm = await asyncio.wait_for(connecting, timeout_s)
        await comm.close()

    pool = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="ckptbench-handshake")
    try:
        pool.submit(asyncio.run, shake()).result(timeout=timeout_s + 5)
    except concurrent.futures.TimeoutError:
        raise TimeoutError("no Dask handshake") from None
    except MemoryError:  # 'HTTP/1.0 426...' read as the length of a 3 EiB frame
        raise ConnectionError(
            "it answers, but not in Dask's protocol (an HTTP server or another service?)"
        ) from None
    finally:
        pool.shutdown(wait=False, cancel_futures=True)


def connect(address: str, cases: Iterable[Case], timeout_s: float = CONNECT_TIMEOUT_S) -> Cluster:
    """Reach the scheduler at ``address`` and check its workers for ``cases``, before
    anything is written: :class:`DaskError` (one line) for a malformed address, no
    ``distributed``, a scheduler that does not answer within ``timeout_s``, no worker
    within ``timeout_s``, or a worker that cannot run the cells (named, with the reason)."""
    address = usable_address(address)
    requires = requirements(cases)
    try:
        from distributed import Client
    except ImportError:
        raise DaskError(NEEDS_DISTRIBUTED) from None
    quiet = contextlib.ExitStack()
    quiet.enter_context(_quiet_logs())
    started = time.monotonic()
    try:
        _handshake(address, timeout_s)
        with warnings.catch_warnings():  # distributed's version table: the probe says it
            warnings.simplefilter("ignore")
            client = Client(address, set_as_default=False, timeout=timeout_s)
    except (KeyboardInterrupt, SystemExit):
        quiet.close()
        raise
    except Exception as err:
        quiet.close()
        waited = time.monotonic() - started >= 0.9 * timeout_s  # else refused at once
        within = f" within {timeout_s:g} s" if waited else ""
        raise DaskError(f"cannot reach Dask scheduler {address}{within}: {one_line(err)}") from None
    cluster = Cluster(address, client, {}, requires, timeout_s, quiet)
    try:
        try:
            client.wait_for_workers(1, timeout=timeout_s)
        except (KeyboardInterrupt, SystemExit):
            raise
        except Exception:
            raise DaskError(
                f"Dask scheduler {address} has no workers (waited {timeout_s:g} s)"
            ) from None
        infos = cluster.probe()
        bad = {a: i.problem(requires) for a, i in infos.items()}
        bad = {a: why for a, why in bad.items() if why is not None}
        if bad:
            worker, why = next(iter(bad.items()))
            more = f" (and {len(bad) - 1} more worker(s))" if len(bad) > 1 else ""
            raise DaskError(f"Dask worker {worker} cannot run this sweep: {why}{more}")
        if not infos:
            raise DaskError(f"Dask scheduler {address} has no workers")
        cluster.workers.update(infos)
        cluster.scheduler_id = cluster.ask_id()
    except BaseException:
        cluster.close()
        raise
    return cluster
