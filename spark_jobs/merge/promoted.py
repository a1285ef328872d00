"""Top-level fields of a document collection promoted to typed Delta columns.

A document lands whole as its Extended JSON text (`records.DOCUMENT_FIELDS`); readers who
filter or join on a few fields want those as columns of their own, typed, statistics and
all.
`lakehouse.promoted.fields` names them per collection (`db.collection.field:type`). A
promoted column is a function of the stored document and nothing else:

- each event's column is read from its document's Extended JSON (`{"$numberLong": ..}`,
  `{"$date": ms}`, `{"$oid": ..}`, `{"$numberDecimal": ..}` unwrapped), null where the
  field is absent or its value does not convert (the document keeps the value);
- an event without its document keeps the stored column, as it keeps the stored
  document (`delta_apply.merge_changes`' `derived`);
- a field promoted after the table exists is added and filled from the stored documents
  before the batch is merged, so old rows have it too; a type changed to a wider one is
  widened as any column is (`evolution`), a narrower or unrelated one refused.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from cdc_core.config.orchestration import promoted_fields
from cdc_core.errors import TidemarkError
from spark_jobs.sql_names import quoted

PROPERTY = "lakehouse.promoted.fields"
DOCUMENT_COLUMN = "document"


@dataclass(frozen=True)
class Promoted:
    """One promoted field: its name in the document (and the column's) and Delta type."""

    field: str
    type: T.DataType


def parse(entries: Sequence[str]) -> dict[str, tuple[Promoted, ...]]:
    """The property's entries per `db.collection` (`orchestration.promoted_fields`)."""
    try:
        tables = promoted_fields(list(entries))
    except ValueError as exc:
        raise TidemarkError(f"{PROPERTY}: {exc}") from None
    return {
        table: tuple(Promoted(name, _delta_type(kind)) for name, kind in fields)
        for table, fields in tables.items()
    }


_TYPES = {
    "string": T.StringType(),
    "boolean": T.BooleanType(),
    "int": T.IntegerType(),
    "bigint": T.LongType(),
    "double": T.DoubleType(),
    "date": T.DateType(),
    "timestamp": T.TimestampType(),
}


def _delta_type(kind: str) -> T.DataType:
    """A normalised type name (`promoted_fields`) as its Spark type (built, not parsed:
    parsing DDL needs a running SparkContext)."""
    if kind.startswith("decimal("):
        precision, scale = kind[len("decimal(") : -1].split(",")
        return T.DecimalType(int(precision), int(scale))
    return _TYPES[kind]


def _at(*path: str) -> str:
    """A variant path literal: `'$["field"]["$date"]'`."""
    steps = "".join(f'["{p}"]' for p in path)
    return f"'${steps}'"


def value(promoted: Promoted, document: str = DOCUMENT_COLUMN) -> Column:
    """The field's value in `document` (a column of Extended JSON text, read as a VARIANT:
    Spark's JSON reader takes the bare `NaN` of strict Extended JSON, `parse_json` does
    not) as the column's type: the Extended JSON wrapper a type is written in is
    unwrapped first."""
    kind, doc = promoted.type, f"from_json({quoted(document)}, 'variant')"

    def get(*path: str, as_type: str | None = None) -> str:
        return f"try_variant_get({doc}, {_at(promoted.field, *path)}, '{as_type or kind.simpleString()}')"

    if isinstance(kind, (T.TimestampType, T.DateType)):
        millis = (
            f"coalesce({get('$date', as_type='bigint')}, {get('$date', '$numberLong', as_type='bigint')})"
        )
        moment = f"coalesce(timestamp_millis({millis}), {get(as_type='timestamp')})"
        return F.expr(f"to_date({moment})" if isinstance(kind, T.DateType) else moment)
    wrappers = {
        T.StringType: ("$oid", "$numberLong", "$numberDecimal"),
        T.BooleanType: (),
    }.get(type(kind), ("$numberLong", "$numberDecimal"))
    return F.expr(f"coalesce({', '.join([*(get(w) for w in wrappers), get()])})")


def with_columns(rows: DataFrame, fields: Sequence[Promoted]) -> DataFrame:
    """`rows` (with their `document`) and the promoted columns."""
    return rows.select("*", *[value(p).alias(p.field) for p in fields])


def fill_new(spark: SparkSession, path: str, stored: T.StructType, fields: Sequence[Promoted]) -> None:
    """Add the promoted columns the stored table lacks and fill them from its documents."""
    have = {f.name for f in stored.fields}
    if DOCUMENT_COLUMN not in have:
        raise TidemarkError(
            f"{PROPERTY} names {path.rstrip('/').rsplit('/', 1)[-1]}, whose Delta table holds no documents"
        )
    new = [p for p in fields if p.field not in have]
    if not new:
        return
    from delta.tables import DeltaTable

    columns = ", ".join(f"{quoted(p.field)} {p.type.simpleString()}" for p in new)
    spark.sql(f"ALTER TABLE delta.{quoted(path)} ADD COLUMNS ({columns})")
    DeltaTable.forPath(spark, path).update(set={p.field: value(p) for p in new})
