"""The one schedule interpreter (``interpreter``): slots, kept tapes, counters, phase timers
and byte accounting for every action kind, in the first sweep and the reverse sweep.
Importing this package imports nothing else."""
