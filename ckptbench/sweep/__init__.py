"""Sweeps: a TOML config's grid of cells (``config``), run locally or on a Dask cluster
(``run``, ``dask``), with cell outcomes (``cells``) and progress (``progress``).

Importing this package imports nothing else; ``run_sweep`` lives in :mod:`ckptbench.sweep.run`.
"""
