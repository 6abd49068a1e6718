"""The engine client: calling the Lua engine (:mod:`~scheduler.engine.scripts`), jobs, queues,
events, errors and limits, and reaching a server (:mod:`~scheduler.engine.connections`).

Nothing is imported here, so a pure module can take :mod:`scheduler.engine.limits` or
:mod:`scheduler.engine.errors` without loading redis; the public names are re-exported by
:mod:`scheduler`.
"""
