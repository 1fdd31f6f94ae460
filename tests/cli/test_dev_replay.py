"""Issue 17's acceptance, CLI side: ``lanes dev --replay`` on free ports brings up the whole
stack and a recorded session that compacts, visible through the API and the inspector."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import time
import uuid
from pathlib import Path

import httpx
import pytest

from lanes_client import LanesClient
from tests.cli.test_cli import REPO, interruptible, lanes_command
from tests.replay.helpers import require_data
from worker.local.stack import free_port


def test_dev_replay_drives_a_recorded_session_to_compactions(database_url, tmp_path):
    require_data()
    data = Path(tmp_path) / "dev"
    env = {k: v for k, v in os.environ.items()
           if k not in ("LANES_API_TOKENS", "LANES_API_TOKEN", "COLUMNS", "OPENAI_BASE_URL", "OPENAI_API_KEY")}
    env.update({"PYTHONPATH": os.pathsep.join((str(REPO), str(REPO / "client"))), "LANES_DATA_DIR": str(data),
                "DATABASE_URL": database_url, "LANES_TASK_QUEUE": f"dev-replay-{uuid.uuid4().hex[:8]}"})
    api_port, temporal_port = free_port(), free_port()
    dev = subprocess.Popen(lanes_command("dev", "--replay", "--api-port", str(api_port), "--temporal-port",
                                         str(temporal_port), "--json"),
                           env=env, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                           start_new_session=True, preexec_fn=interruptible)
    try:
        line = dev.stdout.readline()  # one JSON line once everything is up
        assert line, f"lanes dev exited with {dev.wait(30)}: {dev.stderr.read()[-3000:]}"
        ready = json.loads(line)
        assert ready["api_url"] == f"http://127.0.0.1:{api_port}"
        assert ready["temporal_address"] == f"127.0.0.1:{temporal_port}"
        assert ready["token_file"] == str(data / "api-token") and (data / "replay-model.json").is_file()
        assert ready["model"].startswith("no model endpoint: OPENAI_BASE_URL and OPENAI_API_KEY are unset")
        session = ready["session_id"]
        token = (data / "api-token").read_text().strip()
        assert ready["ui_url"] == f"{ready['api_url']}/ui?token={token}#session={session}"

        with LanesClient(ready["api_url"], token) as lanes:
            deadline = time.monotonic() + 300  # "did not hang"
            while True:
                status = lanes.status(session)
                if status.tasks and status.tasks[0].finished:
                    break
                assert time.monotonic() < deadline and dev.poll() is None
                time.sleep(1)
            assert status.tasks[0].state == "completed"
            report = lanes.context(session)
            assert report.compactions >= 1 and report.working_set_tokens <= report.budget
            kinds = {event.kind for event in lanes.iter_events(session)}
            assert any(kind.startswith("context.compaction") for kind in kinds), kinds
        assert httpx.get(ready["ui_url"].split("#")[0], timeout=10).status_code == 200
        _screenshot_the_inspector(ready["ui_url"], session, report.compactions)

        # the CLI finds this stack through LANES_DATA_DIR: a second replay session, created by name
        cli_env = {**env, "LANES_API_URL": ready["api_url"]}
        second = subprocess.run(lanes_command("session", "new", "--replay", "-q"), env=cli_env, cwd=REPO,
                                capture_output=True, text=True, timeout=120)
        assert second.returncode == 0, second.stderr
        assert second.stdout.strip().startswith("ses-") and second.stdout.count("\n") == 1
        # it compacts as the dev replay does: the same default budget
        with LanesClient(ready["api_url"], token) as lanes:
            assert lanes.get_session(second.stdout.strip()).config["budget_tokens"] == 12_000
    finally:
        dev.send_signal(signal.SIGINT)
        try:
            # drain its output while it stops: a process blocked writing to a full pipe cannot
            # act on Ctrl-C
            _, errors = dev.communicate(timeout=90)
        except subprocess.TimeoutExpired:
            os.killpg(dev.pid, signal.SIGKILL)
            raise
    assert dev.returncode == 0, errors[-3000:]
    assert not (data / "replay-model.json").exists()


def _screenshot_the_inspector(ui_url: str, session: str, compactions: int) -> None:
    """What a newcomer sees at the printed URL, in headless Chromium: the lanes tree, the
    pressure timeline with the compactions marked, the events filtered to compactions."""
    sync_api = pytest.importorskip("playwright.sync_api")
    executable = shutil.which("chromium") or ("/usr/bin/chromium" if Path("/usr/bin/chromium").exists() else None)
    if executable is None:
        if os.environ.get("CI"):
            pytest.fail("no chromium binary (make test installs it)")
        pytest.skip("no chromium binary (apt-get install chromium)")
    artifacts = REPO / "test-artifacts" / "ui"
    artifacts.mkdir(parents=True, exist_ok=True)
    with sync_api.sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=executable, headless=True,
                                             args=["--headless", "--no-sandbox", "--disable-gpu"])
        try:
            page = browser.new_page(viewport={"width": 1440, "height": 1000})
            page.goto(ui_url)
            page.wait_for_selector('#lanes-tree .lane-node[data-lane="main"]')
            page.wait_for_function(f"() => document.querySelectorAll('#timeline .mark').length >= {compactions}")
            assert page.locator("#timeline .sample").count() > 0
            page.screenshot(path=str(artifacts / "dev-replay.png"), full_page=True)
            page.wait_for_function("() => [...document.querySelectorAll('#filter-kind option')]"
                                   ".some(o => o.value === 'context.compaction.*')")
            page.select_option("#filter-kind", "context.compaction.*")
            kinds = page.eval_on_selector_all("#events li", "ls => ls.map(l => l.dataset.kind)")
            assert kinds and all(kind.startswith("context.compaction") for kind in kinds), kinds
            page.locator("#events-section").screenshot(path=str(artifacts / "dev-replay-events.png"))
        finally:
            browser.close()

