"""Agent framework integrations (each needs its framework installed: see pyproject's extras)."""
