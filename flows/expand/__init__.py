"""Expansion: a validated flow, its params and a run id become the run's jobs. Pure: no I/O."""
