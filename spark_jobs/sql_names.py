"""Names as Spark reads them in SQL text and column paths."""

from __future__ import annotations

from collections.abc import Iterable

from pyspark.sql import Column
from pyspark.sql import functions as F


def quoted(name: str) -> str:
    """`name` as one identifier: in backticks, each backtick within it doubled. A source's
    column or table may be named with any character a quoted MySQL identifier takes,
    backticks and dots included, and unquoted they would be read as syntax or as a path."""
    return "`" + name.replace("`", "``") + "`"


def column(name: str) -> Column:
    """The column named exactly `name` (a string given to Spark where it takes a column
    is parsed: `a.b` would be field b of a)."""
    return F.col(quoted(name))


def columns(names: Iterable[str]) -> list[Column]:
    return [column(n) for n in names]
