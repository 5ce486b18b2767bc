"""The soak benchmark's parts (`bench/soak.py` runs them): the programs it starts and restarts, the faults it
injects on a schedule, the people who talk meanwhile, and the figures made from what they saw."""
