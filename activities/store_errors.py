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


class ItemConflict(StoreError):
    """Ids a write was given already hold other content: nothing of the write was stored.
    ``next_free_seq``: the first seq of the lane past every stored item (where ids are free)."""

    def __init__(self, ids: list[str], next_free_seq: int) -> None:
        super().__init__(f"ids already taken by other content: {', '.join(ids[:10])}")
        self.ids = ids
        self.next_free_seq = next_free_seq
