"""The CLI's manners, with no stack: --help starts nothing, --version, a taken port names itself,
piped output is not wrapped, lanes replay is readable at 80 columns and writes CSV and PNG."""

from __future__ import annotations

import csv
import io
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
from rich.console import Console

from tests.cli.test_cli import REPO, lanes_command
from tests.replay.helpers import ROOT, require_data
from worker.cli import COMMANDS
from worker.cli.inspection import session_of_observation
from worker.local.demo import print_summary
from workflows.context import external_observation_id, observation_id

ONE_FILE = ROOT / "claude-code" / "subagent.jsonl.gz"
HELP = [[name] for name in COMMANDS if name != "session"] + \
    [["session"], ["session", "new"], ["session", "list"], ["session", "show"], ["session", "cancel"], []]


def _env(tmp_path: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LANES_API_TOKEN")}
    env.update({"PYTHONPATH": os.pathsep.join((str(REPO), str(REPO / "client"))),
                "LANES_DATA_DIR": str(tmp_path / "data"), **extra})
    return env


def _group_members(pgid: int) -> list[int]:
    """Processes still in process group ``pgid`` (what the command started and left behind)."""
    members = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[2]) == pgid:
            members.append(int(stat.parent.name))
    return members


@pytest.mark.parametrize("words", HELP, ids=[" ".join(w) or "lanes" for w in HELP])
def test_help_starts_nothing_and_exits_0(words, tmp_path):
    env = _env(tmp_path, TEMPORAL_ADDRESS="127.0.0.1:9", DATABASE_URL="postgresql://nobody@127.0.0.1:9/x")
    proc = subprocess.Popen(lanes_command(*words, "--help"), env=env, cwd=REPO, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, start_new_session=True)
    out, err = proc.communicate(timeout=60)  # "did not hang": a started worker or stack would
    assert proc.returncode == 0, err
    assert out.startswith("Usage: lanes") and "--help" in out, out
    assert not _group_members(proc.pid), "the command left processes behind"
    assert not (tmp_path / "data").exists(), "the command wrote to the data directory"
    assert "Traceback" not in err and "`" not in out  # plain text, no markdown backticks


def test_version(tmp_path):
    proc = subprocess.run(lanes_command("--version"), env=_env(tmp_path), cwd=REPO, capture_output=True, text=True,
                          timeout=60)
    assert proc.returncode == 0 and proc.stdout.startswith("lanes ") and proc.stdout.split()[1][0].isdigit()


def test_no_command_is_a_usage_error(tmp_path):
    proc = subprocess.run(lanes_command(), env=_env(tmp_path), cwd=REPO, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2 and "Commands:" in proc.stdout + proc.stderr


@pytest.mark.parametrize("command", [["dev", "--api-port"], ["dev", "--replay", "--port"], ["api", "--port"],
                                     ["demo", "--ui", "--api-port"]])
def test_a_taken_port_names_itself_before_anything_starts(command, tmp_path):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        port = taken.getsockname()[1]
        started = time.monotonic()
        proc = subprocess.run(lanes_command(*command, str(port)), env=_env(tmp_path), cwd=REPO, capture_output=True,
                              text=True, timeout=120)
    assert proc.returncode == 2, proc.stderr
    assert f"port {port}" in proc.stderr and "already in use" in proc.stderr and "choose another with --" in proc.stderr
    assert "Traceback" not in proc.stderr
    assert time.monotonic() - started < 60  # refused up front, not after starting PostgreSQL and Temporal
    assert not (tmp_path / "data" / "postgres").exists() and not (tmp_path / "data" / "logs").exists()


def test_worker_without_temporal_is_one_line(tmp_path):
    proc = subprocess.run(lanes_command("worker"), env=_env(tmp_path, TEMPORAL_ADDRESS="127.0.0.1:9"), cwd=REPO,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 1
    last = proc.stderr.strip().splitlines()[-1]  # (a sandbox warning may come first)
    assert "Traceback" not in proc.stderr and last.startswith("lanes worker: cannot connect to Temporal at 127.0.0.1:9")


def test_the_session_of_an_observation_is_read_from_its_id():
    for session in ("ses-0123456789ab", "demo-1-2", "a.b_c-000001"):
        assert session_of_observation(observation_id(session, "main", 42)) == session
        assert session_of_observation(observation_id(session, "sub-0002", 7)) == session
        assert session_of_observation(external_observation_id(session, "9f8e7d")) == session
    assert session_of_observation("obs-nothing") is None


def test_replay_writes_csv_and_png_and_pipes_unwrapped(tmp_path):
    require_data()
    table, png = tmp_path / "replay.csv", tmp_path / "replay.png"
    proc = subprocess.run(lanes_command("replay", "--policy", "full", "--policy", "lanes", "--budget", "8000",
                                        "--budget", "16000", "--csv", str(table), "--plot", str(png), str(ONE_FILE)),
                          env=_env(tmp_path), cwd=REPO, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    rows = list(csv.DictReader(table.open()))
    assert [(r["budget"], r["policy"]) for r in rows] == [("8000", "full"), ("8000", "lanes"),
                                                          ("16000", "full"), ("16000", "lanes")]
    assert all(int(r["peak_input_tokens"]) > 0 and float(r["cost_units"]) > 0 for r in rows)
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 10_000
    # piped (no terminal, no COLUMNS): one row per policy, never wrapped at 80 columns
    header = next(line for line in proc.stdout.splitlines() if "policy" in line)
    assert "input tokens" in header and "lost items" in header and len(header) > 80
    assert any(len(line) > 80 and "byte-identical" in line for line in proc.stdout.splitlines())


def test_replay_table_is_readable_at_80_columns():
    require_data()
    from worker.replay.command import COLUMNS, _print_table
    from worker.replay.simulator import replay_paths

    out = io.StringIO()
    _print_table(replay_paths([str(ONE_FILE)], ["full", "masking-10", "lanes"], 16_000),
                 console=Console(file=out, width=80))
    lines = out.getvalue().splitlines()
    assert all(len(line) <= 80 for line in lines)
    header = next(line for line in lines if "masking-10" in line)
    assert "full" in header and "lanes" in header  # policies across, whole
    for figure in COLUMNS:  # one row per figure, its name on one line
        assert any(figure in line for line in lines), figure


def test_replay_defaults_match_the_simulator():
    from worker.cli import local
    from worker.cli import replay as cli_replay
    from worker.local import replay_session
    from worker.replay import simulator

    assert (cli_replay.DEFAULT_BUDGET, cli_replay.DEFAULT_POLICIES) == (simulator.DEFAULT_BUDGET,
                                                                        simulator.DEFAULT_POLICIES)
    assert local.DEFAULT_BUDGET == replay_session.DEFAULT_REPLAY_BUDGET


def test_help_is_quick_to_import():
    """``lanes --help`` must not import the Temporal SDK or the engine (it starts nothing)."""
    code = "import sys; from worker.cli.app import build; build(); " \
           "print(sorted(m for m in sys.modules if m.split('.')[0] in ('temporalio', 'asyncpg', 'matplotlib')))"
    proc = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=60,
                          env=_env(Path("/nonexistent")))
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "[]"


def test_the_demo_summary_says_what_each_figure_means():
    summary = {"session_id": "demo-1", "recorded_steps": 30, "steps": 31, "budget": 3_412,
               "tool_definition_tokens": 588, "compactions": 4}
    console = Console(record=True, width=200)
    print_summary(summary, console)
    text = console.export_text()
    assert "3,412" in text and "the session's budget less the tool definitions" in text
    assert "then one that ends the replay" in text  # why steps is recorded_steps + 1
    assert "compacted 4 times to stay inside 3,412 tokens" in text


def test_the_dev_banner_never_breaks_a_url_it_prints():
    from worker.local.dev import banner_console

    url = "http://127.0.0.1:8000/ui?token=" + "t" * 64 + "#session=ses-0123456789ab"
    console = banner_console(as_json=False, width=40)
    with console.capture() as captured:
        console.print(f"  inspector  {url}")
    assert url in captured.get().splitlines()[0]
