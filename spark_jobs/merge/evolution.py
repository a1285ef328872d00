"""Schema changes between a Delta table and the events bound for it.

Added columns are fine (the MERGE adds them). A column whose type grew in a way Delta can
widen in place (type widening) is fine too. Anything else — a number that became text, a
narrower decimal — is refused with the table, column and both types named, before any
table of the batch is merged, so nothing of that batch is applied.
"""

from __future__ import annotations

from pyspark.sql import types as T

from cdc_core.errors import TidemarkError

_INTEGERS = [T.ByteType, T.ShortType, T.IntegerType, T.LongType]


def widens(old: T.DataType, new: T.DataType) -> bool:
    """Whether Delta's type widening takes a column from `old` to `new`."""
    if type(old) in _INTEGERS and type(new) in _INTEGERS:
        return _INTEGERS.index(type(old)) <= _INTEGERS.index(type(new))
    if isinstance(old, T.FloatType) and isinstance(new, T.DoubleType):
        return True
    if isinstance(old, T.DateType) and isinstance(new, T.TimestampNTZType):
        return True
    if isinstance(old, T.DecimalType) and isinstance(new, T.DecimalType):
        return new.scale >= old.scale and new.precision - new.scale >= old.precision - old.scale
    if type(old) in _INTEGERS and isinstance(new, T.DecimalType):
        digits = {T.ByteType: 3, T.ShortType: 5, T.IntegerType: 10, T.LongType: 20}[type(old)]
        return new.precision - new.scale >= digits
    return False


def check(table: str, stored: T.StructType, incoming: T.StructType) -> bool:
    """True when the table needs widening; raises on a change Delta cannot take."""
    types = {f.name: f.dataType for f in stored.fields}
    widen = False
    for field in incoming.fields:
        old = types.get(field.name)
        if old is None or old == field.dataType or isinstance(field.dataType, T.NullType):
            continue
        if widens(field.dataType, old):  # an older, narrower event: cast up
            continue
        if widens(old, field.dataType):
            widen = True
            continue
        raise TidemarkError(
            f"{table}: column {field.name} changed from {old.simpleString()} to {field.dataType.simpleString()}, "
            "which Delta cannot widen; nothing of this batch was applied (rewrite the table or map the column)"
        )
    return widen
