"""The huey instance huey's own consumer loads in ``python -m benchmarks.peers``.

``huey_consumer benchmarks.huey_app.app`` imports this module, as huey's consumer is run in
practice: ``RedisHuey`` on ``$FLOWS_REDIS_URL`` with the tasks :func:`benchmarks.peers.huey_tasks`
registers (so the enqueuing side and the consumer agree on their names). Needs huey installed.
"""

from __future__ import annotations

import os
from typing import Any

from benchmarks.peers import huey_tasks

app: Any = huey_tasks(os.environ["FLOWS_REDIS_URL"]).app
