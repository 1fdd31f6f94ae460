"""``lanes demo`` as ``make run`` runs it (issues 12 and 17): a recorded session replayed
whole through the real stack, its summary, and ``--ui`` keeping the stack and the inspector
up afterwards. Temporal and PostgreSQL are the suite's (the demo uses what is running)."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import time
import uuid
from pathlib import Path

import httpx

from lanes_client import LanesClient
from recordings import load_trajectory
from tests.cli.test_cli import REPO, interruptible, lanes_command
from tests.recordings import SHORT_TRAJECTORY
from tests.replay.helpers import require_data
from worker.local.demo import MEANINGS
from worker.local.stack import free_port


def test_demo_replays_the_whole_recording_and_ui_keeps_the_inspector_up(database_url, temporal_address, tmp_path):
    require_data()
    recorded = len(load_trajectory(SHORT_TRAJECTORY).turns)
    env = {k: v for k, v in os.environ.items() if k not in ("LANES_API_TOKENS", "LANES_API_TOKEN", "COLUMNS")}
    env.update({"PYTHONPATH": os.pathsep.join((str(REPO), str(REPO / "client"))),
                "DATABASE_URL": database_url, "TEMPORAL_ADDRESS": temporal_address,
                "LANES_TASK_QUEUE": f"demo-{uuid.uuid4().hex[:8]}"})
    port = free_port()
    log = Path(tmp_path) / "demo.stderr"
    with open(log, "w") as stderr:
        demo = subprocess.Popen(
            lanes_command("demo", "--trajectory", str(SHORT_TRAJECTORY), "--budget", "4000", "--ui",
                          "--api-port", str(port), "--json", "--data-dir", str(Path(tmp_path) / "data")),
            env=env, cwd=REPO, stdout=subprocess.PIPE, stderr=stderr, text=True, start_new_session=True,
            preexec_fn=interruptible)
    try:
        line = demo.stdout.readline()  # the summary, once the session is done
        assert line, f"lanes demo exited with {demo.wait(30)}: {log.read_text()[-3000:]}"
        summary = json.loads(line)
        assert summary["task_state"] == "completed"
        assert summary["recorded_steps"] == summary["replayed_steps"] == recorded  # the whole recording
        assert summary["steps"] == recorded + 1 and summary["duplicate_items"] == 0
        assert summary["compactions"] >= 1 and summary["context_tokens"] <= summary["budget"]
        assert summary["budget"] + summary["tool_definition_tokens"] == 4000
        assert set(summary) <= set(MEANINGS)  # the table explains every figure the demo reports

        # --ui: the stack stays up and the printed inspector address (with its token) works
        notes = log.read_text()
        url = re.search(r"inspector: (http://127\.0\.0\.1:(\d+)/ui\?token=(\S+)#session=(\S+))", notes)
        assert url is not None, notes
        assert int(url.group(2)) == port and url.group(4) == summary["session_id"]
        assert demo.poll() is None, "the stack went away after the demo"
        assert httpx.get(url.group(1).split("#")[0], timeout=10).status_code == 200
        with LanesClient(f"http://127.0.0.1:{port}", url.group(3)) as lanes:
            assert lanes.context(summary["session_id"]).compactions == summary["compactions"]
        # the printed CLI command runs as printed, in a shell without the virtualenv on PATH
        for _ in range(100):  # printed right after the summary
            if (cli := re.search(r"^CLI: +(.+)$", log.read_text(), re.M)) is not None:
                break
            time.sleep(0.1)
        assert cli is not None, log.read_text()
        bare = {**env, "PATH": os.pathsep.join(p for p in env.get("PATH", "").split(os.pathsep)
                                               if not p.startswith(str(REPO / ".venv")))}
        ran = subprocess.run(["bash", "-c", cli.group(1)], env=bare, cwd=REPO, capture_output=True, text=True,
                             timeout=60)
        assert ran.returncode == 0 and f"compactions {summary['compactions']}," in ran.stdout, (
            cli.group(1), ran.stdout[-2000:], ran.stderr[-2000:])
    finally:
        if demo.poll() is None:
            os.killpg(demo.pid, signal.SIGINT)  # Ctrl-C, as the note says
        code = demo.wait(60)
    assert code == 0, log.read_text()[-3000:]
