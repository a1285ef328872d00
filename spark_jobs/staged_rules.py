"""The connector's column rules as Spark expressions, for rows Spark's JDBC reader stages.

Each expression is derived from the rule objects of `cdc_core.filters` (through the
table's `StagedForm`), so staged rows get exactly what `RowShaper` gives events: a mask
replaces any value by its `*`s; a truncation keeps the first N characters (Spark, like
Python, counts code points); a hash digests the salt followed by the value's event form.

Spark builds that event form only where it is the value Spark reads: text columns (the
string itself) and integer columns whose event value is the number (its digits are its
JSON text). A hash over any other column (a date's day number, a decimal's bytes), or
with an algorithm Spark has no function for, has no expression here: such a table is
read by the Python reader, which applies the rule objects themselves.
tests/integration/test_staged_column_rules.py checks every expression against them.
"""

from __future__ import annotations

from collections.abc import Callable

from pyspark.sql import Column
from pyspark.sql import functions as F

from cdc_core.filters import Hash, Mask, Truncate
from cdc_core.snapshot.staged_form import ShapedColumn, StagedForm
from cdc_core.source import IDENTITY
from spark_jobs.sql_names import quoted

# hashlib names → Spark's functions giving the same lowercase hex digest of UTF-8 text.
HASHES: dict[str, Callable[[Column], Column]] = {
    "md5": F.md5,
    "sha1": F.sha1,
    "sha224": lambda c: F.sha2(c, 224),
    "sha256": lambda c: F.sha2(c, 256),
    "sha384": lambda c: F.sha2(c, 384),
    "sha512": lambda c: F.sha2(c, 512),
}
_INTEGERS = {"int8", "int16", "int32", "int64"}


def shaped_expression(column: ShapedColumn) -> Column | None:
    """The staged value of `column` (its rules applied to its event form), as a string
    column named like it; None when Spark cannot compute it exactly."""
    value = _event_text(column)
    for rule in column.rules:
        if isinstance(rule, Mask):
            value = F.lit(rule.apply(None))
        elif value is None:
            return None
        elif isinstance(rule, Truncate):
            value = F.substring(value, 1, rule.width)
        elif isinstance(rule, Hash):
            digest = HASHES.get(rule.algorithm)
            if digest is None:
                return None
            value = digest(F.concat(F.lit(rule.salt), value))
        else:  # a rule this module does not know yet: never stage it unshaped
            return None
    assert value is not None  # a column is shaped only when some rule applies to it
    source = F.col(quoted(column.name))
    return F.when(source.isNull(), F.lit(None).cast("string")).otherwise(value).alias(column.name)


def _event_text(column: ShapedColumn) -> Column | None:
    """The text of the column's event value, where it is the value Spark reads."""
    source = F.col(quoted(column.name))
    if column.mapping.text:
        return source.cast("string")
    if column.mapping.convert is IDENTITY and column.mapping.schema.get("type") in _INTEGERS:
        return source.cast("string")
    return None


def staged_expressions(form: StagedForm) -> tuple[dict[str, Column], list[str]]:
    """The expression of every shaped column of `form`, and the columns (with their rule)
    Spark cannot shape exactly, which send the table to the Python reader."""
    expressions: dict[str, Column] = {}
    unsupported: list[str] = []
    for column in form.shaped.values():
        expression = shaped_expression(column)
        if expression is None:
            rules = ", ".join(repr(r) for r in column.rules)
            unsupported.append(f"{column.name} ({rules})")
        else:
            expressions[column.name] = expression
    return expressions, unsupported
