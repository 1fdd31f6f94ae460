"""Tool-exchange classification: what a call did decides how early its output is evicted.

Writes go first (their effect is in the repository), reads next, runs and errors last
(test logs and failures are what the agent reasons about). Shell commands are classified
by the command itself: ``cd repo && sed -n 1,40p f.py | nl`` is a read, ``cat > f <<EOF``
is a write, ``python -m pytest`` is a run.
"""

from __future__ import annotations

import json
import re
import shlex

from .items import ToolClass

WRITE_TOOLS = frozenset({
    "write", "write_file", "create_file", "edit", "edit_file", "multiedit", "multi_edit", "str_replace",
    "str_replace_based_edit_tool_write", "apply_patch", "patch", "insert", "replace", "delete_file",
    "move_file", "rename_file", "notebookedit", "notebook_edit", "todowrite",
})
READ_TOOLS = frozenset({
    "read", "read_file", "view", "view_file", "open", "open_file", "cat", "list", "list_dir", "list_files",
    "ls", "glob", "grep", "search", "search_files", "find", "find_files", "recall_observation",
    "webfetch", "web_fetch", "websearch", "web_search", "fetch",
})
RUN_TOOLS = frozenset({"run", "test", "run_tests", "execute", "python", "task", "agent"})
SHELL_TOOLS = frozenset({
    "bash", "shell", "sh", "zsh", "run_command", "run_shell", "run_shell_command", "execute_command",
    "exec", "exec_command", "terminal", "command", "cmd", "local_shell", "container_exec",
})
EDITOR_TOOLS = frozenset({"str_replace_editor", "str_replace_based_edit_tool", "text_editor"})

_WRITE_PROGRAMS = frozenset({
    "tee", "mv", "cp", "rm", "rmdir", "touch", "mkdir", "ln", "chmod", "chown", "patch", "truncate",
    "ed", "ex", "install", "unzip", "tar",
})
_READ_PROGRAMS = frozenset({
    "cat", "head", "tail", "less", "more", "grep", "egrep", "fgrep", "rg", "ag", "ack", "sed", "ls", "ll",
    "find", "fd", "wc", "nl", "awk", "gawk", "tree", "file", "stat", "du", "df", "pwd", "which", "type",
    "whereis", "diff", "cmp", "jq", "xxd", "od", "hexdump", "strings", "sort", "uniq", "cut", "tr", "column",
    "basename", "dirname", "realpath", "readlink", "view", "bat", "whoami", "id", "uname", "env", "printenv",
    "date", "history",
})
# Commands with no effect of their own: they neither make a chain a read nor a write.
_NEUTRAL_PROGRAMS = frozenset({"cd", "pushd", "popd", "echo", "printf", "true", "false", ":", "export",
                               "set", "unset", "source", ".", "exit", "sleep", "clear"})
# Prefixes that run the next word as the real command.
_WRAPPERS = frozenset({"sudo", "time", "nohup", "nice", "command", "exec", "builtin", "xargs", "stdbuf"})
_GIT_READS = frozenset({"diff", "log", "show", "status", "blame", "grep", "ls-files", "branch", "rev-parse",
                        "describe", "shortlog", "reflog", "remote", "tag", "config", "cat-file", "ls-tree"})
_GIT_WRITES = frozenset({"apply", "am", "checkout", "restore", "add", "rm", "mv", "commit", "reset", "stash",
                         "cherry-pick", "merge", "rebase", "revert", "clean", "switch"})
_SEPARATORS = frozenset({"&&", "||", ";", "|", "&", "|&", ";;", "(", ")"})
_REDIRECTS = frozenset({">", ">>", "&>", "&>>", ">|", ">&"})
_HARMLESS_TARGETS = frozenset({"/dev/null", "/dev/stdout", "/dev/stderr", "/dev/tty", "-"})
_HEREDOC = re.compile(r"(?<!<)<<(?!<)-?[ \t]*(['\"]?)([A-Za-z_][A-Za-z0-9_]*)\1")
_ENV_ASSIGNMENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*=")

# Importance when one command chains several: its output is what the most important part printed.
_RANK = {ToolClass.WRITE: 0, ToolClass.READ: 1, ToolClass.RUN: 2}


def classify_tool(name: str | None, arguments: str | None = None, exit_code: int | None = None) -> ToolClass:
    """Class of one tool exchange from the tool name, its raw arguments and the exit code."""
    if exit_code not in (None, 0):
        return ToolClass.ERROR
    tool = _normalise_name(name or "")
    args = _parse_arguments(arguments)
    if tool in EDITOR_TOOLS:
        return ToolClass.READ if str(args.get("command", "")).lower() == "view" else ToolClass.WRITE
    if tool in SHELL_TOOLS:
        command = next((args[k] for k in ("command", "cmd", "script", "input") if k in args), None)
        if isinstance(command, list):  # argv form: ["bash", "-lc", "ls"]
            command = shlex.join(map(str, command))
        if not isinstance(command, str):  # text-protocol agents pass the raw command line
            command = arguments if arguments and not args else ""
        return classify_command(command)
    if tool in WRITE_TOOLS:
        return ToolClass.WRITE
    if tool in READ_TOOLS:
        return ToolClass.READ
    return ToolClass.RUN


def _normalise_name(name: str) -> str:
    """``functions.Bash`` / ``mcp__fs__read_file`` / ``Read`` -> ``bash`` / ``read_file`` / ``read``."""
    tool = name.strip().lower()
    tool = tool.rsplit(".", 1)[-1]
    if tool.startswith("mcp__"):
        tool = tool.rsplit("__", 1)[-1]
    return tool.replace("-", "_")


def _parse_arguments(arguments: str | None) -> dict:
    if not arguments:
        return {}
    try:
        parsed = json.loads(arguments)
    except ValueError:
        return {}
    return parsed if isinstance(parsed, dict) else {}


def classify_command(command: str) -> ToolClass:
    """Class of a shell command line: the most important effect among its simple commands."""
    classes = [c for c in (_classify_simple(words) for words in _simple_commands(command)) if c is not None]
    if not classes:
        return ToolClass.READ if command.strip() else ToolClass.RUN
    return max(classes, key=_RANK.__getitem__)


def _simple_commands(command: str) -> list[list[str]]:
    """Words of each simple command; heredoc bodies dropped, unquoted newlines separate."""
    body_free = _strip_heredoc_bodies(command)
    try:
        lexer = shlex.shlex(_newlines_to_separators(body_free), posix=True, punctuation_chars=True)
        lexer.whitespace_split = True
        lexer.commenters = "#"
        tokens = list(lexer)
    except ValueError:  # unbalanced quotes: fall back to whitespace words
        tokens = body_free.replace(";", " ; ").replace("&&", " && ").replace("|", " | ").split()
    commands: list[list[str]] = []
    current: list[str] = []
    for token in tokens:
        if token in _SEPARATORS:
            if current:
                commands.append(current)
            current = []
        else:
            current.append(token)
    if current:
        commands.append(current)
    return commands


def _strip_heredoc_bodies(command: str) -> str:
    """Remove the lines of every heredoc body: they are data, not commands."""
    lines = command.split("\n")
    out: list[str] = []
    index = 0
    while index < len(lines):
        line = lines[index]
        out.append(line)
        index += 1
        for match in _HEREDOC.finditer(line):
            delimiter = match.group(2)
            while index < len(lines) and lines[index].strip() != delimiter:
                index += 1
            index += 1  # the delimiter line itself
    return "\n".join(out)


def _newlines_to_separators(command: str) -> str:
    """Turn unquoted newlines into ';' (shlex treats them as spaces), joining continuations."""
    out, quote, escaped = [], None, False
    for char in command:
        if escaped:
            escaped = False
            out.append(" " if char == "\n" else "\\" + char)
            continue
        if char == "\\" and quote != "'":
            escaped = True
            continue
        if quote:
            quote = None if char == quote else quote
        elif char in "'\"":
            quote = char
        elif char == "\n":
            char = " ; "
        out.append(char)
    if escaped:
        out.append("\\")
    return "".join(out)


def _classify_simple(words: list[str]) -> ToolClass | None:
    """Class of one simple command (None when it has no effect of its own)."""
    words, writes_file = _strip_redirections(words)
    words = _unwrap(words)
    if writes_file:
        return ToolClass.WRITE
    if not words:
        return None
    program = words[0].rsplit("/", 1)[-1]
    args = words[1:]
    if program in ("bash", "sh", "zsh") and len(args) >= 2 and args[0].startswith("-") and "c" in args[0]:
        return classify_command(args[1])
    if program in _NEUTRAL_PROGRAMS:
        return None
    if program == "git":
        return _classify_git(args)
    if program in ("sed", "gsed"):
        return ToolClass.WRITE if any(_is_in_place_flag(a) for a in args) else ToolClass.READ
    if program in ("awk", "gawk"):
        return ToolClass.WRITE if "inplace" in args else ToolClass.READ
    if program == "perl":
        return ToolClass.WRITE if any(a.startswith("-") and "i" in a[1:] for a in args) else ToolClass.RUN
    if program in ("vim", "vi", "nvim"):
        return ToolClass.WRITE if any(a.startswith(("-c", "+")) for a in args) else ToolClass.RUN
    if program in ("find", "fd"):
        return ToolClass.WRITE if any(a in ("-delete", "rm") for a in args) else ToolClass.READ
    if program == "sort":
        return ToolClass.WRITE if any(a == "-o" or a.startswith("--output") for a in args) else ToolClass.READ
    if program in _WRITE_PROGRAMS:
        return ToolClass.WRITE
    if program in _READ_PROGRAMS:
        return ToolClass.READ
    return ToolClass.RUN


def _is_in_place_flag(arg: str) -> bool:
    """sed -i, -i.bak, -ni, --in-place (but not -n or -e)."""
    if arg.startswith("--in-place"):
        return True
    return arg.startswith("-") and not arg.startswith("--") and "i" in arg[1:].split(".", 1)[0]


def _strip_redirections(words: list[str]) -> tuple[list[str], bool]:
    """Drop redirection operators and targets; report whether one writes a real file.

    ``2>&1`` lexes as ``2``, ``>&``, ``1``: a digit word before an operator is its file
    descriptor, and a digit or ``&``-target is a descriptor copy, not a file.
    """
    kept: list[str] = []
    writes_file = False
    index = 0
    while index < len(words):
        word = words[index]
        operator = word.lstrip("0123456789") if word[:1].isdigit() else word
        if operator in _REDIRECTS or operator in ("<", "<<", "<<<", "<<-", "<&"):
            target = words[index + 1] if index + 1 < len(words) else ""
            harmless = target in _HARMLESS_TARGETS or target.isdigit() or target.startswith("&")
            if operator in _REDIRECTS and not harmless:
                writes_file = True
            if len(kept) > 1 and kept[-1].isdigit():
                kept.pop()
            index += 2
            continue
        kept.append(word)
        index += 1
    return kept, writes_file


def _unwrap(words: list[str]) -> list[str]:
    """Skip environment assignments and wrappers such as sudo, time, timeout 60, env X=1."""
    index = 0
    while index < len(words):
        word = words[index]
        if _ENV_ASSIGNMENT.match(word):
            index += 1
        elif word in _WRAPPERS or word == "env":
            index += 1
            while index < len(words) and words[index].startswith("-"):
                index += 1
        elif word == "timeout":
            index += 1
            while index < len(words) and words[index].startswith("-"):
                index += 1
            index += 1  # the duration
        else:
            break
    return words[index:]


def git_subcommand(args: list[str]) -> str:
    """The subcommand of ``git ARGS`` (``status`` when none), past -C dir, -c k=v, --no-pager."""
    index = 0
    while index < len(args) and args[index].startswith("-"):
        index += 2 if args[index] in ("-C", "-c") else 1
    return args[index] if index < len(args) else "status"


def _classify_git(args: list[str]) -> ToolClass:
    sub = git_subcommand(args)
    if sub in _GIT_WRITES:
        return ToolClass.WRITE
    if sub in _GIT_READS:
        return ToolClass.READ
    return ToolClass.RUN
