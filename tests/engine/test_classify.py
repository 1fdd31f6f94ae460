"""Tool classification: writes are evicted first, reads next, runs and errors last."""

import json

import pytest

from workflows.context.classify import classify_command, classify_tool
from workflows.context.items import ToolClass

R, W, X = ToolClass.READ, ToolClass.WRITE, ToolClass.RUN

SHELL_TABLE = [
    # reading
    ("cat auth.py", R),
    ("cd repo && cat a.py | head -5 2>&1", R),
    ("sed -n '1,10p' django/core/validators.py", R),
    ("nl -ba django/db/models/sql/query.py | sed -n '1070,1085p'", R),
    ("grep -rn 'def as_sql' django/ | wc -l", R),
    ("rg -n TODO src", R),
    ("ls -la; find . -name '*.py'", R),
    ("awk '{print $1}' data.txt", R),
    ("tail -n 50 log.txt", R),
    ("git diff", R),
    ("git -C repo log --oneline -5", R),
    ("git show HEAD~1 --stat", R),
    ("git status", R),
    ("echo hi > /dev/null", R),
    ("ls &>/dev/null", R),
    ("echo 'a > b'", R),
    ("bash -lc 'cat a | head'", R),
    ("echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT && git add -A && git diff --cached", R),
    ("cat file | tee out.txt", R),  # reads and writes: the output is the read content
    # writing
    ("sed -i 's/a/b/' auth.py", W),
    ("sed -i.bak -e 's/x/y/' f", W),
    ("echo hi > out.txt", W),
    ("printf 'x' >> notes.md", W),
    ("head -n 5 f > g", W),
    ("cat <<'EOF' > test_shape.py\nimport os\nprint(1 > 2)\nEOF", W),
    ("cat > f.py <<EOF\nx = 1\nEOF", W),
    ("tee f < x", W),
    ("git apply fix.diff", W),
    ("patch -p1 < fix.diff", W),
    ("mv a.py b.py", W),
    ("cp a.py b.py", W),
    ("rm -rf build", W),
    ("touch new.py", W),
    ("mkdir -p a/b && touch a/b/c", W),
    ("perl -pi -e 's/a/b/' f", W),
    ("vim -c ':%s/a/b/g' -c ':wq' f", W),
    ("ed -s f <<< $'1d\\nw'", W),
    ("find . -name '*.pyc' -delete", W),
    ("rm reproduce_issue.py\nsed -i '/import x/d' pkg/__init__.py", W),
    # running
    ("python reproduce_issue.py", X),
    ("python x.py 2>&1", X),
    ("python x.py > log.txt 2>&1", W),  # the output went to a file: nothing to keep
    ("python - <<EOF\nopen('x','w').write('y')\nEOF", X),  # ambiguous heredoc script: run
    ("cd /repo && python -m pytest -x -q", X),
    ("pytest -q tests", X),
    ("./tests/runtests.py validators", X),
    ("timeout 60 python t.py", X),
    ("FOO=1 pip install -e .", X),
    ("make build", X),
    ("sed -i 's/x/y/' f && python t.py", X),  # the output is the run
    ("", X),
]


@pytest.mark.parametrize("command,expected", SHELL_TABLE, ids=[c[:40] or "empty" for c, _ in SHELL_TABLE])
def test_shell_commands_are_classified_by_the_command_itself(command, expected):
    assert classify_command(command) == expected


NAMED_TABLE = [
    ("write_file", None, W), ("edit", None, W), ("str_replace", None, W), ("apply_patch", None, W),
    ("Write", None, W), ("MultiEdit", None, W), ("create_file", None, W),
    ("read_file", None, R), ("list", None, R), ("grep", None, R), ("search", None, R),
    ("recall_observation", None, R), ("Read", None, R), ("Glob", None, R), ("mcp__fs__read_file", None, R),
    ("run", None, X), ("test", None, X), ("run_tests", None, X), ("some_custom_tool", None, X),
    ("str_replace_editor", json.dumps({"command": "view", "path": "a.py"}), R),
    ("str_replace_editor", json.dumps({"command": "str_replace", "path": "a.py"}), W),
    ("bash", json.dumps({"command": "cat a.py"}), R),
    ("functions.Bash", json.dumps({"command": "sed -i s/a/b/ f"}), W),
    ("run_command", json.dumps({"cmd": "pytest"}), X),
    ("shell", json.dumps({"command": ["bash", "-lc", "ls"]}), R),
    ("bash", "cat a.py | grep foo", R),  # text-protocol agents: the raw command as arguments
]


@pytest.mark.parametrize("name,arguments,expected", NAMED_TABLE, ids=[f"{n}-{i}" for i, (n, _, _) in enumerate(NAMED_TABLE)])
def test_named_tools_are_classified_by_name_and_arguments(name, arguments, expected):
    assert classify_tool(name, arguments, 0) == expected


@pytest.mark.parametrize("name,arguments", [("bash", '{"command": "cat x"}'), ("write_file", None), ("run", None)])
def test_non_zero_exit_code_is_an_error(name, arguments):
    assert classify_tool(name, arguments, exit_code=2) == ToolClass.ERROR
    assert classify_tool(name, arguments, exit_code=None) != ToolClass.ERROR


def test_unbalanced_quotes_do_not_raise():
    assert classify_command("grep 'unterminated foo.py") == R
    assert classify_command("sed -i 's/a/b f") == W
