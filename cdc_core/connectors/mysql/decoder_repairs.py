"""Where python-mysql-replication 1.0.17 decodes row images wrongly, put right in the
decoder child, where the column types are known, so that every later stage sees the
value the server holds (as a chunk read gives it).

- A negative TIME(n) with a fraction, whose complemented fraction bytes it reads as
  they are; an empty SET, which it gives as None.
- ENUM and SET members named in a charset other than UTF-8 (latin1 'ä'), which it reads
  from the table map as UTF-8 and gives as '': the index or bits go to the parent, whose
  schema history has the names from the DDL.
- Text in UTF-16, UTF-32 or UCS-2 (MySQL stores them big-endian; the library decodes
  them with Python's codec of the charset's name, which reads UTF-16 and UTF-32 as
  little-endian and has no `ucs2`: the streamer stopped on the first such row, or emitted
  the bytes), `utf16le` and `macce` (no codec of those names either): `charsets.py`.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

from pymysqlreplication.constants import FIELD_TYPE, NONE_SOURCE

from cdc_core.connectors.mysql.charsets import python_codec


def repairs_for(columns: Any) -> tuple[tuple[int, str, Any], ...] | None:
    """(position, name, repair) for the columns of a table map that need one. Text columns
    are given the name of the Python codec of their charset in place, before any row of
    the table map is decoded: the library then decodes them right."""
    found = []
    for position, column in enumerate(columns):
        charset = getattr(column, "character_set_name", None)
        if charset is not None and charset != "binary":  # (binary: the library keeps the bytes)
            column.character_set_name = python_codec(charset)
        if column.type == FIELD_TYPE.TIME2 and getattr(column, "fsp", 0):
            found.append((position, column.name, _negative_time_fraction))
        elif column.type == FIELD_TYPE.ENUM:
            if column.enum_values is not _INDEX:  # (the names as read, for readers without the DDL)
                column.enum_names, column.enum_values = column.enum_values, _INDEX
        elif column.type == FIELD_TYPE.SET:
            if column.set_values is not _BITS:
                column.set_names, column.set_values = column.set_values, _BITS
            found.append((position, column.name, None))
    return tuple(found) or None


class _Index:
    """Stands for an ENUM's member names, which the library reads from the table map as
    UTF-8 and gives as '' where they are not (a latin1 'ä'): with it, the library gives
    the member's index, which the parent maps through the names the schema history read
    from the DDL (`cdc_core.connectors.mysql.types`)."""

    def __getitem__(self, index: int) -> int:
        return index

    def __bool__(self) -> bool:
        return True


_INDEX = _Index()
# The same for a SET's members: each stands for its bit, and the value is their sum.
_BITS = tuple(1 << i for i in range(64))


def repaired(values: dict[str, Any], none_sources: dict[str, str], repairs: Any) -> tuple[Any, ...]:
    row = tuple(values.values())
    if repairs is None:
        return row
    fixed = list(row)
    for position, name, repair in repairs:
        value = fixed[position]
        if repair is None:  # SET: its members' bits; an empty set is decoded as None, marked as such
            if value is not None:
                fixed[position] = sum(value)
            elif none_sources.get(name) == NONE_SOURCE.EMPTY_SET:
                fixed[position] = 0
        elif value is not None:
            fixed[position] = repair(value)
    return tuple(fixed)


_SECOND = 1_000_000


def _negative_time_fraction(value: dt.timedelta) -> dt.timedelta:
    """A negative TIME(n) with a fraction comes out of the decoder as -(s + (1 - f))
    instead of -(s + f): its fraction bytes, stored complemented, are read as they are."""
    micros = (value.days * 86_400 + value.seconds) * _SECOND + value.microseconds
    if micros >= 0:
        return value
    whole, fraction = divmod(-micros, _SECOND)
    if fraction == 0:
        return value
    return dt.timedelta(microseconds=-(whole * _SECOND + (_SECOND - fraction)))
