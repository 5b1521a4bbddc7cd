"""The measuring side (pyperf's manager/worker split): everything that takes a measurement.

* ``launch`` starts and supervises one fresh worker process; ``worker`` is the only code
  inside the measured process; ``tasks`` runs side tasks in disposable workers;
* ``runner`` measures a case in rounds and saves after every mode; ``sources`` watches the
  plug-in's source files (its own and the modules it imports) between modes;
* ``peaks`` (exact VmHWM peaks, the RSS sampler, the environment), ``noise`` (what else the
  machine was doing), ``stepcosts`` (the planner's step costs), ``layercosts`` (a layer
  chain's per-layer costs) and ``lineprofile``
  (``ckptbench profile``).

This package's ``__init__`` imports nothing: the worker imports only what its backend needs.
"""
