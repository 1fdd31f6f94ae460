"""The errors of the PostgreSQL store (activities.store), in a module of their own so that
the migrations and the row codecs can raise them without importing the store."""

from __future__ import annotations


class StoreError(RuntimeError):
    """Base class of the store's errors."""


class StoreUnavailable(StoreError):
    """PostgreSQL could not be reached (after retrying)."""


class MigrationError(StoreError):
    pass


class SessionNotFound(StoreError, LookupError):
    pass


class ObservationNotFound(StoreError, LookupError):
    pass


class CheckpointNotFound(StoreError, LookupError):
    pass


class ObservationConflict(StoreError):
    """An observation id already belongs to another session."""


class ToolSetNotFound(StoreError, LookupError):
    pass
