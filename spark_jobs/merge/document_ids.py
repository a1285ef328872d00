"""A document table's `_id` as it lands, and tables landed in the earlier document form.

A document source's events and released snapshot rows name their document by the record
key's text; its Delta table holds that text in the form its documents write values
(`cdc_core.connector.DocumentIds`), so `_id` and `document` read alike. Keys the source
calls plain (most: strings, small integers, ObjectIds) land as they are; only the rest
go through Python, a batch at a time.
"""

from __future__ import annotations

from typing import Any

from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T

from cdc_core.connector import DocumentIds
from cdc_core.errors import TidemarkError

ID, DOCUMENT = "_id", "document"


def landed(rows: DataFrame, ids: DocumentIds) -> DataFrame:
    """`rows` with their `_id` in its landed form."""
    key = F.col(ID)
    rewrite = _rewriter(ids.landed)
    # A Python UDF runs on every row whatever a condition around it says; given a null
    # for the plain keys, it skips them without a call.
    found = F.coalesce(rewrite(F.when(~key.rlike(ids.plain), key)), key)
    return rows.withColumn(ID, found)


def _rewriter(function: Any) -> Any:
    # pandas is imported here, not with the module (as `connect_types._decimal_udf` does).
    import pandas as pd

    def rewrite(texts: Any) -> Any:
        return texts.map(function, na_action="ignore")

    rewrite.__annotations__ = {"texts": pd.Series, "return": pd.Series}
    return F.pandas_udf(rewrite, T.StringType())  # type: ignore[call-overload]


def check_stored(name: str, stored: T.StructType | None) -> None:
    """A document table landed by a Tidemark that kept documents as VARIANT (which sorts
    a document's members and loses -0.0) and `_id` as the record key's text cannot take
    this form's rows: merging them would key one document twice. Refused, saying how to
    land the collection again."""
    if stored is None or DOCUMENT not in stored.fieldNames():
        return
    if isinstance(stored[DOCUMENT].dataType, T.VariantType):
        raise TidemarkError(
            f"the Delta table of {name} holds its documents as VARIANT, the form of an earlier Tidemark; "
            "documents now land as their exact Extended JSON text, with `_id` in the same form. Nothing of "
            "this batch was merged. Land the collection again: move its table aside (or drop it), then "
            "snapshot the collection (an execute-snapshot signal, e.g. `tidemark signal execute-snapshot`), "
            "and merge"
        )
