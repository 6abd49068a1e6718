"""The job function a mocked step runs instead of its own (``mock:`` in a flow test).

The test driver points the job at :func:`play` with the attempt's stub in its data, so the
worker's runner maps what it does to an outcome exactly as for a real step: outputs complete
the job, a failure is retried under the step's policy (its backoff and delays), an exit code
fails as a shell step's does (group ``exit-code-N``).
"""

from __future__ import annotations

from typing import Any, Final

from flows.runtime.tasks import ShellError
from scheduler.worker import JobContext

STUB_KLASS: Final = "flows.testing.stub.play"
STUB_KEY: Final = "__flows_test_stub__"


class StubbedFailure(Exception):
    """The error a ``fail:`` stub raises; ``group`` is the stub's text."""

    def __init__(self, group: str) -> None:
        super().__init__(f"stubbed failure: {group}")
        self.group = group


def play(job: JobContext) -> Any:
    stub = job.data[STUB_KEY]
    if stub.get("exit") is not None:
        raise ShellError(int(stub["exit"]), f"stubbed exit code {stub['exit']}")
    if stub.get("fail") is not None:
        raise StubbedFailure(str(stub["fail"]))
    outputs = stub.get("outputs")
    return dict(outputs) if outputs else None
