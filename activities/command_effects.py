"""Whether a shell command may change the world, for at-most-once tool runs.

A bash call that may have effects records that it started before it runs; a retry after
a crash then reports the interruption instead of running it again. Only a command that
surely only reads may simply re-run. So this is stricter than the compaction classifier
(``workflows/context/classify.py``), which ranks a chain by its most telling part
(``echo x >> log; cat log`` is a read there, as its output is what the agent reads).
Being wrong here in the safe direction costs little: a read-only command that crashed
with its worker is reported as interrupted instead of re-run.
"""

from __future__ import annotations

import json
import re

from workflows.context import git_subcommand
from workflows.context.classify import _is_in_place_flag, _simple_commands, _strip_redirections, _unwrap

# Programs that only read (their options checked below where one could write or run).
_PURE_READERS = frozenset({
    "cat", "head", "tail", "less", "more", "grep", "egrep", "fgrep", "rg", "ag", "ack", "ls", "ll", "wc",
    "nl", "tree", "file", "stat", "du", "df", "pwd", "which", "type", "whereis", "diff", "cmp", "jq", "xxd",
    "od", "hexdump", "strings", "uniq", "cut", "tr", "column", "basename", "dirname", "realpath", "readlink",
    "bat", "whoami", "id", "uname", "printenv", "date", "fd",
})
# Commands that change nothing outside the shell that runs them.
_INERT = frozenset({"cd", "pushd", "popd", "echo", "printf", "true", "false", ":", "export", "set", "unset",
                    "exit", "sleep", "clear", "env"})
_GIT_PURE_READS = frozenset({"diff", "log", "show", "status", "blame", "grep", "ls-files", "rev-parse",
                             "describe", "shortlog", "cat-file", "ls-tree"})
# Text that runs another command inside this one: $(...), `...`, <(...), >(...).
_SUBSTITUTION = re.compile(r"\$\(|`|<\(|>\(")
_FIND_ACTIONS = frozenset({"-exec", "-execdir", "-ok", "-okdir", "-delete", "-fprint", "-fprint0", "-fprintf",
                           "-fls"})
# sed's w/W (write a file) and e (run a command) commands, after an address, a ; or a s///.
_SED_WRITE_OR_RUN = re.compile(r"(^|[;/}\s\d$])[wWe](\s|$)")


def command_may_have_effects(command: str) -> bool:
    """True unless every simple command of ``command`` surely only reads."""
    if _SUBSTITUTION.search(command):
        return True
    return not all(_reads_only(words) for words in _simple_commands(command))


def bash_call_may_have_effects(arguments: str) -> bool:
    """For a bash tool call's JSON arguments (``{"command": ...}``); unreadable ones may."""
    try:
        args = json.loads(arguments or "{}")
    except ValueError:
        return True
    command = args.get("command") if isinstance(args, dict) else None
    return not isinstance(command, str) or command_may_have_effects(command)


def _reads_only(words: list[str]) -> bool:
    words, writes_file = _strip_redirections(words)
    if writes_file:
        return False
    words = _unwrap(words)
    if not words:
        return True
    program, args = words[0].rsplit("/", 1)[-1], words[1:]
    if program in ("bash", "sh", "zsh") and len(args) >= 2 and args[0].startswith("-") and "c" in args[0]:
        return not command_may_have_effects(args[1])
    if any(a.startswith(("--output", "--pre")) for a in args):  # git diff --output=f, rg --pre CMD
        return False
    if program in _INERT or program in _PURE_READERS:
        return True
    if program == "find":
        return not any(a in _FIND_ACTIONS for a in args)
    if program == "sort":
        return "-o" not in args
    if program in ("sed", "gsed"):
        return not any(_is_in_place_flag(a) or (not a.startswith("-") and _SED_WRITE_OR_RUN.search(a))
                       for a in args)
    if program in ("awk", "gawk"):
        return not any(token in a for a in args for token in ("system", ">", "|", "inplace"))
    if program == "git":
        return git_subcommand(args) in _GIT_PURE_READS
    return False
