"""Which bash commands may re-run after a crash (pure: activities/command_effects.py).

A command counts as read-only only when every part of it only reads; a write anywhere in
a chain, a pipeline or a substitution makes the whole call one that runs at most once."""

from __future__ import annotations

import json

import pytest

from activities.command_effects import bash_call_may_have_effects, command_may_have_effects


@pytest.mark.parametrize("command", [
    "echo hi >> log; cat log",          # a write, then a read (the compaction classifier says "read")
    "rm -rf build && ls",
    "ls | xargs rm",
    "cat $(touch made)",
    "cat `touch made`",
    "diff <(rm a) b",
    "python -c 'print(1)'",
    "make",
    "sed -i s/a/b/ f.py",
    "sed -n 's/a/b/w out' f.py",
    "awk 'BEGIN { system(\"rm x\") }'",
    "awk '{ print > \"out\" }' f",
    "find . -name '*.pyc' -delete",
    "find . -exec rm {} ;",
    "sort -o sorted.txt f",
    "git commit -am x",
    "git branch feature",
    "git diff --output=patch.diff",
    "rg --pre ./script pattern",
    "source env.sh && ls",
    "bash -c 'ls; rm x'",
    "cat f | tee copy",
    "timeout 5 touch x",
])
def test_commands_with_any_effect_run_at_most_once(command):
    assert command_may_have_effects(command)


@pytest.mark.parametrize("command", [
    "ls -la",
    "cd repo && sed -n 1,40p f.py | nl",
    "grep -rn TODO . 2>/dev/null | head -20",
    "cat a.py b.py",
    "find . -name '*.py' | wc -l",
    "git -C repo status && git --no-pager log -5",
    "git diff HEAD~1",
    "awk '{print $1}' f | sort | uniq -c",
    "echo done",
    "bash -c 'ls -la'",
    "env | sort",
    "",
])
def test_commands_that_only_read_may_run_again(command):
    assert not command_may_have_effects(command)


def test_the_tool_call_arguments_are_read_and_unreadable_ones_may_have_effects():
    assert bash_call_may_have_effects(json.dumps({"command": "echo hi >> log; cat log"}))
    assert not bash_call_may_have_effects(json.dumps({"command": "cat log"}))
    assert bash_call_may_have_effects("not json")
    assert bash_call_may_have_effects(json.dumps({"command": ["rm", "x"]}))
