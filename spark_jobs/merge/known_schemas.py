"""The Connect schemas a merge has already seen, per topic, so most records are cut by a
prefix comparison and parsed in the same pass, without first collecting the batch's
schemas.

A table's events repeat the same schema text until its DDL changes. Knowing that text,
a record is `{"schema":` + text + `,"payload":` + payload + `}` exactly when its value
starts with that prefix and ends with `}`: one memory comparison of the prefix and a
copy of the payload, against a byte search through the whole schema and a hash of it
(`cutting.cut`'s general path, about six times the cost). The schemas come from the
batches merged before in the same run and from a few records sampled at the start of
each batch; records whose schema is not known yet take the general path
(`spark_jobs.delta_merge.parsed_batch`). The merge job keeps them in its checkpoint
(`load`, `save`), so its next run starts knowing them: a scheduled run is a new process,
and without them each run's first batch would search every topic the sample missed. The
file is only a head start: a stale or unreadable one costs a search, never a wrong row
(a prefix that no longer matches is simply not taken).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from typing import Any

from py4j.protocol import Py4JJavaError
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from spark_jobs.hadoop_files import read_text, write_text
from spark_jobs.merge.cutting import CUT, OPEN
from spark_jobs.merge.records import Shape, Shapes

log = logging.getLogger("spark_jobs.delta_merge")
VERSION = 1
FILE = "known-schemas.json"

# Per topic, the most recent distinct schemas (a table's DDL history within one run).
_PER_TOPIC = 8
_SAMPLE = 16


def known_ids(spark: SparkSession, known: Sequence[tuple[str, str]]) -> dict[int, str]:
    """Each known schema text by the id `cut` gives it (Spark's xxhash64 of the text)."""
    if not known:
        return {}
    texts = sorted({text for _, text in known})
    row = spark.range(1).select(*[F.xxhash64(F.lit(t)) for t in texts]).first()
    assert row is not None
    return dict(zip(row, texts, strict=True))


def schema_of(value: str | None) -> str | None:
    """The schema text of a value in the streamer's form, or None. The text up to the
    first `,"payload":` is the schema only if it is a whole JSON object: a schema holding
    an object key "payload" is cut short there and is not valid JSON."""
    if not value or not value.startswith(OPEN):
        return None
    end = value.find(CUT, len(OPEN))
    if end < 0:
        return None
    text = value[len(OPEN) : end]
    try:
        return text if isinstance(json.loads(text), dict) else None
    except ValueError:
        return None


class KnownSchemas:
    """Schema texts per topic, newest first, with a sample key of the topic."""

    def __init__(self) -> None:
        self._by_topic: dict[str, list[str]] = {}
        self._keys: dict[str, str | None] = {}
        self._saved: list[tuple[str, str]] = []  # the pairs the checkpoint holds (`load`, `save`)
        # digest → (topic, schema text): the schemas schemaless values name (`refer`)
        self.references: dict[str, tuple[str, str]] = {}

    def refer(self, catalogue: dict[str, tuple[str, str]]) -> None:
        """The schemas schemaless values name by reference (`<prefix>.schemas`, in log
        order, `spark_jobs.merge.schema_catalogue`): known from now on like those of
        earlier batches."""
        for digest, (topic, text) in catalogue.items():
            if digest not in self.references:
                self.add(topic, text, None)
                self.references[digest] = (topic, text)

    def add(self, topic: str, text: str, key: str | None) -> None:
        texts = self._by_topic.setdefault(topic, [])
        if text in texts:
            texts.remove(text)
        texts.insert(0, text)
        del texts[_PER_TOPIC:]
        if key is not None or topic not in self._keys:
            self._keys[topic] = key

    def expect(self, topic: str, schema: dict[str, object]) -> None:
        """A schema the contract fixes (the transaction topic's), in the streamer's compact
        form, unless the topic has schemas already: known before any record is sampled."""
        if topic not in self._by_topic:
            self.add(topic, json.dumps(schema, separators=(",", ":")), None)

    def learn(self, shapes: Shapes) -> None:
        for shape in shapes.all():
            if shape.schema is not None and shape.text is not None:
                self.add(shape.topic, shape.text, shape.key)

    def sample(self, records: DataFrame, size: int = _SAMPLE) -> int:
        """Learn the schemas of the batch's first few records: Spark reads only as far as
        it needs for them (the first partition, as a rule). A record of a topic not
        sampled costs more (`parsed_batch`), once per run. Returns how many it read
        (none: `records` is empty)."""
        rows = records.select("topic", "key", "value").limit(size).collect()
        for row in rows:
            text = schema_of(row.value)
            if text is not None:
                self.add(row.topic, text, row.key)
        return len(rows)

    def to_json(self) -> dict[str, Any]:
        topics = {
            topic: {"schemas": texts} for topic, texts in self._by_topic.items()
        }  # no sample key: each batch takes its own (`census`)
        return {"version": VERSION, "topics": topics}

    @classmethod
    def from_json(cls, body: Any) -> KnownSchemas:
        """The schemas of a saved file; entries that are not a schema's JSON object are
        left out (the search finds them again)."""
        if not isinstance(body, dict) or body.get("version") != VERSION:
            version = body.get("version") if isinstance(body, dict) else None
            raise ValueError(f"version {version!r}, this Tidemark reads version {VERSION}")
        known = cls()
        for topic, entry in sorted(body["topics"].items()):
            for text in reversed(entry["schemas"][:_PER_TOPIC]):
                if isinstance(text, str) and schema_of(OPEN + text + CUT) == text:
                    known.add(topic, text, None)
        return known

    @classmethod
    def load(cls, spark: SparkSession, folder: str) -> KnownSchemas:
        """The schemas saved under `folder` (a merge checkpoint); none if the file is
        missing or unreadable."""
        path = f"{folder.rstrip('/')}/{FILE}"
        try:
            text = read_text(spark, path)
            known = cls() if text is None else cls.from_json(json.loads(text))
            known._saved = known.pairs()
            return known
        except (ValueError, KeyError, TypeError, AttributeError, Py4JJavaError) as exc:
            reason = exc.java_exception.toString() if isinstance(exc, Py4JJavaError) else exc
            log.warning("ignoring %s (%s): schemas are found by search again", path, reason)
            return cls()

    def save(self, spark: SparkSession, folder: str) -> None:
        """Write the file under `folder` if the schemas changed since `load` or `save`."""
        if self.pairs() == self._saved:
            return
        write_text(spark, f"{folder.rstrip('/')}/{FILE}", json.dumps(self.to_json(), sort_keys=True))
        self._saved = self.pairs()

    def pairs(self) -> list[tuple[str, str]]:
        return [(topic, text) for topic, texts in sorted(self._by_topic.items()) for text in texts]

    def shapes(self, spark: SparkSession, not_rows: set[str]) -> Shapes:
        """Every known schema as a `Shape`, its parsed row in a column `row_k<n>` (apart
        from the `row_<n>` columns `records.collect_shapes` names)."""
        ids = {text: schema_id for schema_id, text in known_ids(spark, self.pairs()).items()}
        by_topic: dict[str, list[Shape]] = {}
        for n, (topic, text) in enumerate(self.pairs()):
            column = "" if topic in not_rows else f"row_k{n}"
            shape = Shape(topic, ids[text], json.loads(text), text, self._keys.get(topic), column)
            by_topic.setdefault(topic, []).append(shape)
        return Shapes(by_topic)
