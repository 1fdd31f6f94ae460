"""``python -m worker.cli ARGS``: the ``lanes`` command (what tests run, whatever is installed)."""

from worker.cli import main

main()
