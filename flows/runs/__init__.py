"""Runs in the engine: build, submit, read back, trigger, backfill, signals to waits, step logs,
and the flow layer as the scheduler service sees it."""
