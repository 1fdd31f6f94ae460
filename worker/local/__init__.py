"""The local stack: Temporal dev server, PostgreSQL, worker and API processes on one machine
(``lanes dev``), and the offline end-to-end demo (``lanes demo``)."""
