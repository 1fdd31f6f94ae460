"""How printed hints name this installation's executables, so that a hint runs as printed:
after ``make run`` the virtualenv is not on PATH, and a bare ``lanes`` would not be found."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path


def installed_command(name: str) -> str:
    """``name`` when PATH finds this environment's own executable of that name, else its path
    (relative to the current folder when it lies under it: ``.venv/bin/lanes``)."""
    own = Path(sys.executable).parent / name  # the virtualenv's bin, not the interpreter it links to
    found = shutil.which(name)
    if found is not None and Path(found).resolve() == own.resolve():
        return name
    try:
        return str(own.relative_to(Path.cwd()))
    except ValueError:
        return str(own)
