"""The autograd backend: the built-in workloads and every strategy of ours, run with autograd.

* ``framework`` — autograd's operations for the modes written once in
  :mod:`ckptbench.backends.modes`, and ``BACKEND``;
* ``binding`` — ``binomial_checkpoint``: any action stream of :mod:`ckptbench.schedules` as
  one autograd primitive over :mod:`ckptbench.engine` (Griewank & Walther, Algorithm 799:
  Revolve, 2000).
"""
