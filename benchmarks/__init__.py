"""Benchmarks of redis-flows against raw-Redis baselines: ``python benchmarks/run.py --help``.

Every throughput and latency figure is measured next to a baseline on the same server, with the
same client library, in the same run, and reported as a ratio to it (shared machines drift).

* :mod:`benchmarks.run` -- the command line: picks benchmarks, prints the table, writes JSON;
* :mod:`benchmarks.context` -- the private server, sizes and the clients every benchmark uses;
* :mod:`benchmarks.baseline` -- raw Redis: LPUSH, pipelined LPUSH, a reliable list queue, PING;
* :mod:`benchmarks.throughput`, :mod:`benchmarks.latency`, :mod:`benchmarks.server_cost`,
  :mod:`benchmarks.flowbench` -- the engine's figures;
* :mod:`benchmarks.processes` -- worker pools, CPU accounting, ``--busy`` spinners;
* :mod:`benchmarks.figures`, :mod:`benchmarks.report` -- figures, targets, the table and JSON;
* :mod:`benchmarks.tasks` -- the job functions the benchmark's workers run.
* :mod:`benchmarks.peers` -- the same put and latency figures for huey, side by side
  (``python -m benchmarks.peers``; :mod:`benchmarks.huey_app` is what huey's consumer loads).
"""
