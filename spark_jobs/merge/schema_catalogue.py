"""The schemas schemaless values name by reference: the records of `<prefix>.schemas`.

The streamer writes each (topic, value schema) it names there once per run, keyed by its
digest (`cdc_core.pipeline.schema_references`). The merge reads the whole topic, which
holds one record per schema version and run, before each batch: a value names a schema
written before it, so every reference of the batch is in hand.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from pyspark.sql import SparkSession

from cdc_core.errors import TidemarkError
from cdc_core.pipeline.schema_references import schemas_topic
from cdc_core.sinks.local_log import LocalEventLogReader
from spark_jobs.merge.kafka_source import kafka_records

_SCHEMA = ',"schema":'

Catalogue = dict[str, tuple[str, str]]  # digest → (topic, schema text as the streamer wrote it)


def schema_entry(value: str) -> tuple[str, str, str]:
    """(digest, topic, schema text) of one record: the text is cut from the value as
    written, so it is byte for byte the schema a value with schemas would carry."""
    try:
        record = json.loads(value)
        start = value.index(_SCHEMA) + len(_SCHEMA)
        digest, topic, schema = record["id"], record["topic"], record["schema"]
    except (ValueError, KeyError, TypeError) as exc:
        raise TidemarkError(f"a record on the schemas topic is not a schema record: {value[:200]!r}") from exc
    if not isinstance(schema, dict) or not value.endswith("}"):
        raise TidemarkError(f"a record on the schemas topic is not a schema record: {value[:200]!r}")
    return str(digest), str(topic), value[start:-1]


def catalogue_of(values: list[str]) -> Catalogue:
    catalogue: Catalogue = {}
    for value in values:
        digest, topic, text = schema_entry(value)
        catalogue[digest] = (topic, text)
    return catalogue


def local_catalogue(log_root: Path, prefix: str) -> Catalogue:
    topic = schemas_topic(prefix)
    if not (Path(log_root) / topic).is_dir():
        return {}
    records = LocalEventLogReader(Path(log_root)).read(topic)
    return catalogue_of([r.value.decode() for r in records if r.value is not None])


def kafka_catalogue(spark: SparkSession, servers: str, prefix: str) -> Catalogue:
    """The topic read whole as a batch (none yet: an empty catalogue)."""
    records = kafka_records(
        spark.read,
        servers,
        1,
        subscribePattern=f"^{re.escape(schemas_topic(prefix))}$",  # searched for in topic names: anchored
        startingOffsets="earliest",
        endingOffsets="latest",
    )
    rows = records.where("value IS NOT NULL").select("partition", "offset", "value").collect()
    return catalogue_of([r.value for r in sorted(rows, key=lambda r: (r.partition, r.offset))])
