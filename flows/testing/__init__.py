"""Flow tests: ``*.test.yaml`` files beside flows, run against the real engine on a virtual clock.

- :mod:`flows.testing.files` reads a test file into cases (findings with file:line:col);
- :mod:`flows.testing.clock` is the virtual clock and the engine that sends its time as ``now``;
- :mod:`flows.testing.driver` runs one case: a run (or a schedule over a period) worked to its end;
- :mod:`flows.testing.expect` compares what happened with the case's ``expect:`` (a diff);
- :mod:`flows.testing.session` finds test files and runs them on a server (``flows test``);
- :mod:`flows.testing.pytest_plugin` lets ``pytest`` collect the same files.
"""
