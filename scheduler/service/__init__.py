"""The scheduler service: its loop (:mod:`~scheduler.service.loop`), the schedule registry it
fires from (:mod:`~scheduler.service.schedules`, with its plain records in
:mod:`~scheduler.service.records`), the pure catch-up decisions
(:mod:`~scheduler.service.planning`), folder scanning and housekeeping.

Nothing is imported here, so the pure modules load without redis.
"""
