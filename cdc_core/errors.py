"""Errors a user can act on: each says what failed and what to do about it."""

from __future__ import annotations


class TidemarkError(Exception):
    """Base class: the message is meant for the person running the connector."""


class ConfigError(TidemarkError):
    """A connector property is unknown, missing or invalid; the message names it."""

    def __init__(self, prop: str, message: str) -> None:
        super().__init__(f"{prop}: {message}")
        self.property = prop


class SourceUnavailableError(TidemarkError):
    """The source database cannot be reached right now; retrying from the committed
    offset is safe."""


class PositionLostError(TidemarkError):
    """The log position to resume from no longer exists in the source (e.g. purged)."""


class SchemaMismatchError(TidemarkError):
    """A change cannot be decoded with the schema the timeline holds for its table."""


class UnsupportedTypeError(TidemarkError):
    """A column type has no mapping to the event format."""
