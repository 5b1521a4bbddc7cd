"""The clocks ckptbench times with, bound once, when this module is first imported.

The worker (``ckptbench.measure.worker``) imports this module before it loads a plug-in,
so a plug-in that replaces ``time.perf_counter``, ``time.process_time`` or
``time.thread_time`` changes the clock it reads itself, never the one its iterations,
phases and step costs are timed with. Every clock read on the measuring side (the worker,
the engine, the backends, the step and layer costs) goes through these names; the parent
process, which never imports a plug-in, reads :mod:`time` as usual.
"""

from __future__ import annotations

import time

__all__ = ["perf_counter", "process_time", "thread_time"]

#: Wall time (``time.perf_counter`` as it was when ckptbench started).
perf_counter = time.perf_counter
#: CPU time of the whole process, every thread.
process_time = time.process_time
#: CPU time of the calling thread alone: never more than the wall time it spans.
thread_time = time.thread_time
