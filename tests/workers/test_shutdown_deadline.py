"""A worker whose shutdown hangs still exits: grace + SHUTDOWN_SLACK_SECONDS after SIGTERM.

The hang is simulated in a real worker process by replacing the last shutdown step
(closing the store) with one that never returns.
"""

from __future__ import annotations

import sys

from tests.integration.support import REPO, worker_env
from tests.workers.support import WorkerProcess
from worker.local.stack import popen_group

GRACE, SLACK = 1.0, 2.0
HANGING_WORKER = f"""
import asyncio
import worker.worker as w

async def never_returns(*_stores):
    await asyncio.Event().wait()

w.SHUTDOWN_SLACK_SECONDS = {SLACK}
w.close_stores = never_returns
w.main()
"""


async def test_a_hung_shutdown_exits_after_grace_plus_slack(queue_settings, stack_dir):
    log = stack_dir / "logs" / "hung-shutdown-worker.log"
    start = log.stat().st_size if log.exists() else 0
    env = {**worker_env(queue_settings), "LANES_SHUTDOWN_GRACE_SECONDS": f"{GRACE:g}", "LANES_LOG_LEVEL": "INFO"}
    worker = WorkerProcess(popen_group([sys.executable, "-c", HANGING_WORKER], log, env=env, cwd=REPO), log, start)
    try:
        await worker.wait_ready()
        code, seconds = await worker.terminate(timeout=GRACE + SLACK + 30)
        assert code == 1, f"exit code {code} after {seconds:.1f}s:\n{worker.log()}"
        assert seconds >= GRACE + SLACK  # the deadline, not something else, ended it
        assert "SIGTERM: stopping; in-flight activities have 1s to finish" in worker.log()
        assert "exiting anyway" in worker.log()
    finally:
        worker.kill()
