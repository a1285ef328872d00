"""The merge benchmark's inputs (`bench.merge_throughput`): a table as a snapshot left
it, a batch of change events in the streamer's JSON with their transactions' BEGIN/END
records, and that batch already deduplicated for the bare MERGE. Prepared once under the
work folder and reused by later runs (`--work`)."""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson

from cdc_core.events.connect_schema import envelope_schema, field, key_schema, row_schema, struct
from cdc_core.transactions import TRANSACTION_KEY_SCHEMA, TRANSACTION_VALUE_SCHEMA

PREFIX = "benchmerge"
TOPIC = f"{PREFIX}.bench.t"
FIELDS = [
    field("int32", "id", optional=False),
    field("int32", "counter"),
    field("string", "name"),
    field("string", "city"),
    field("double", "amount"),
    field("int64", "seen", logical="io.debezium.time.Timestamp", version=1),
    field("int16", "flag"),
    field("string", "note"),
    field("int64", "big"),
    field("string", "code"),
]
SOURCE = struct(
    "source", [field("int64", "ts_ms"), field("string", "db"), field("string", "table")], field_name="source"
)
# The row's columns as Spark SQL over a generated id `k` and a version `v`.
ROW_SQL = {
    "id": "k",
    "counter": "CAST(v % 1000 AS INT)",
    "name": "concat('name-', k, '-', v)",
    "city": "concat('city-', k % 50)",
    "amount": "CAST(k * 1.5 + v AS DOUBLE)",
    "seen": "1704067200000 + v * 1000",
    "flag": "CAST(k % 2 AS SMALLINT)",
    "note": "concat('note ', v)",
    "big": "CAST(k AS BIGINT) * 7",
    "code": "concat('x', k % 13)",
}


def row_struct(alias: str) -> str:
    return "named_struct(" + ", ".join(f"'{c}', {e}" for c, e in ROW_SQL.items()) + f") AS {alias}"


def base_table(spark, path: str, rows: int) -> None:
    """`rows` rows as the merge would have left them after a snapshot."""
    from pyspark.sql import functions as F

    from spark_jobs.merge.delta_apply import create_table

    frame = (
        spark.range(1, rows + 1)
        .selectExpr("CAST(id AS INT) AS k", "0L AS v")
        .selectExpr(row_struct("r"))
        .select("r.*")
    )
    frame = frame.selectExpr(
        "*", "CAST(0 AS BIGINT) AS _cdc_epoch", "CAST(0 AS BIGINT) AS _cdc_rank", "CAST(id AS BIGINT) AS _cdc_total_order",
        "'r' AS _cdc_op", "timestamp_millis(1704067200000) AS _cdc_source_ts", "'snapshot' AS _cdc_txn_id",
        "false AS _cdc_deleted",
    )  # fmt: skip
    frame = frame.withColumn("seen", F.timestamp_millis(F.col("seen")).cast("timestamp_ntz"))
    create_table(spark, path, frame.limit(0))
    frame.write.format("delta").mode("append").save(path)


def keyed(spark, path: str) -> None:
    """The table's key kept with it (`tidemark.key`) as the merge keeps it from the
    table's first batch on: without it every timed batch, each on a fresh clone, would
    write it first in a commit of its own (0.8 s), which no batch after a table's first
    does."""
    from spark_jobs.merge import rekeying
    from spark_jobs.merge.delta_apply import stored_properties

    if rekeying.stored_key(stored_properties(spark, path)) is None:
        rekeying.keep(spark, path, rekeying.TableKey(("id",)))


def value_schema_text() -> str:
    """The change events' Connect schema as the streamer writes it (compact JSON)."""
    return json.dumps(envelope_schema(TOPIC, row_schema(TOPIC, FIELDS), SOURCE), separators=(",", ":"))


def transaction_schema_text() -> str:
    return json.dumps(TRANSACTION_VALUE_SCHEMA, separators=(",", ":"))


def key_schema_texts() -> dict[str, str]:
    """Each topic's key schema, as the streamer writes it."""
    return {
        TOPIC: json.dumps(key_schema(TOPIC, [FIELDS[0]]), separators=(",", ":")),
        f"{PREFIX}.transaction": json.dumps(TRANSACTION_KEY_SCHEMA, separators=(",", ":")),
    }


def events(spark, out: str, count: int, table_rows: int, txn_size: int) -> None:
    """`count` events in streamer form: inserts of new keys, updates and deletes of
    existing ones (keys drawn with repeats, so deduplication matters), `txn_size` to a
    source transaction, each transaction with its BEGIN and END records."""
    value_schema = value_schema_text()
    txn_schema = transaction_schema_text()
    key_schema_json, txn_key_schema = key_schema_texts().values()
    kind = "CASE WHEN n % 10 < 3 THEN 'c' WHEN n % 10 < 9 THEN 'u' ELSE 'd' END"
    existing = f"CAST(pmod(xxhash64(n), {table_rows}) + 1 AS INT)"
    frame = (
        spark.range(0, count)
        .selectExpr("id AS n")
        .selectExpr(
            "n",
            f"{kind} AS op",
            f"CASE WHEN {kind} = 'c' THEN CAST({table_rows} + n + 1 AS INT) ELSE {existing} END AS k",
            f"n DIV {txn_size} + 1 AS txn",
            f"n % {txn_size} + 1 AS total",
        )
    )
    frame = frame.selectExpr("n", "op", "k", "n AS v", "txn", "total").selectExpr(
        "n", "op", "k", "txn", "total", row_struct("r"), "named_struct('id', k) AS key_payload"
    )
    payload = (
        "named_struct('before', CASE WHEN op = 'c' THEN NULL ELSE r END, 'after', CASE WHEN op = 'd' THEN NULL ELSE r END, "
        "'source', named_struct('ts_ms', 1704067200000 + n, 'db', 'bench', 'table', 't'), "
        "'transaction', named_struct('id', concat('0-1-', txn), 'total_order', total, 'data_collection_order', total, "
        "'transaction_epoch', 1L, 'transaction_rank', txn), 'op', op, 'ts_ms', 1704067200000 + n)"
    )
    changes = frame.selectExpr(
        "txn",
        "total AS pos",
        f"'{TOPIC}' AS topic",
        f"concat('{{\"schema\":', '{key_schema_json}', ',\"payload\":', to_json(key_payload), '}}') AS key",
        f"concat('{{\"schema\":', '{value_schema}', ',\"payload\":', to_json({payload}), '}}') AS value",
    )
    transactions = spark.range(1, (count + txn_size - 1) // txn_size + 1).selectExpr(
        "id AS txn", f"least({txn_size}, {count} - (id - 1) * {txn_size}) AS size"
    )
    status = transactions.selectExpr("txn", "size", "explode(array('BEGIN', 'END')) AS status")
    begin_end = (
        "named_struct('status', status, 'id', concat('0-1-', txn), "
        "'event_count', CASE WHEN status = 'END' THEN size END, "
        "'data_collections', CASE WHEN status = 'END' THEN "
        "array(named_struct('data_collection', 'bench.t', 'event_count', size)) END, 'ts_ms', 1704067200000 + txn)"
    )
    boundaries = status.selectExpr(
        "txn",
        "CASE WHEN status = 'BEGIN' THEN 0 ELSE size + 1 END AS pos",
        f"'{PREFIX}.transaction' AS topic",
        f"concat('{{\"schema\":', '{txn_key_schema}', ',\"payload\":', to_json(named_struct('id', concat('0-1-', txn))), '}}') AS key",
        f"concat('{{\"schema\":', '{txn_schema}', ',\"payload\":', to_json({begin_end}), '}}') AS value",
    )
    # In the order the streamer writes them: each transaction's BEGIN, its events, its END;
    # with the position each would have in a Kafka topic of one partition, as a Kafka
    # batch gives its records (the merge reads a held-back record again by position).
    place = "row_number() OVER (PARTITION BY topic ORDER BY txn, pos) - 1"
    ordered = (
        changes.unionByName(boundaries)
        .selectExpr("*", "0 AS partition", f"CAST({place} AS BIGINT) AS offset")
        .orderBy("txn", "pos")
        .drop("txn", "pos")
    )
    ordered.write.mode("overwrite").parquet(out)


def schemaless(spark, records: str, out: str) -> dict[str, tuple[str, str]]:
    """The same records as the streamer writes them with `value.converter.schemas.enable:
    false`: each value its payload alone, naming its schema by reference (`schema_ref`);
    returns the catalogue the streamer would have written to `<prefix>.schemas`."""
    from pyspark.sql import functions as F

    from cdc_core.pipeline.schema_references import schema_digest
    from spark_jobs.merge.cutting import CUT, OPEN, bytes_between

    texts = {TOPIC: value_schema_text(), f"{PREFIX}.transaction": transaction_schema_text()}
    catalogue = {schema_digest(t, x.encode()): (t, x) for t, x in texts.items()}
    digests = {t: d for d, (t, _) in catalogue.items()}
    at = F.when(F.col("topic") == TOPIC, F.lit(len((OPEN + texts[TOPIC] + CUT).encode()))).otherwise(
        F.lit(len((OPEN + texts[f"{PREFIX}.transaction"] + CUT).encode()))
    )
    ref = F.when(F.col("topic") == TOPIC, F.lit(digests[TOPIC])).otherwise(
        F.lit(digests[f"{PREFIX}.transaction"])
    )
    if not Path(out, "_SUCCESS").exists():
        (
            spark.read.parquet(records)
            .select("topic", "key", "value", at.alias("at"))
            .select(
                "topic",
                "key",
                bytes_between("at + 1", "octet_length(value) - at - 1").alias("value"),
                ref.alias("schema_ref"),
            )
            .write.mode("overwrite")
            .parquet(out)
        )
    return catalogue


def binary_log(schemaless_records: str, out: Path) -> Path:
    """The same records in the embedded log's Parquet form, written by its own writer as
    the streamer hands it records (payloads with their schemas apart, 20,000 to a flush).
    Made once from the schemaless records (whose values are already payloads alone)."""
    from cdc_core.events.envelope import Record
    from cdc_core.sinks.parquet_log import ParquetEventLog
    from spark_jobs.merge.cutting import CUT, OPEN

    if (out / "_DONE_ORDERED").exists():  # (logs made before cuts were written are made again)
        return out
    shutil.rmtree(out, ignore_errors=True)
    values = {
        TOPIC: value_schema_text().encode(),
        f"{PREFIX}.transaction": transaction_schema_text().encode(),
    }
    keys = {topic: text.encode() for topic, text in key_schema_texts().items()}
    cut = {topic: len((OPEN + text + CUT).encode()) for topic, text in key_schema_texts().items()}
    _write_log(
        ParquetEventLog(out, fsync=False),
        _in_stream_order(schemaless_records, orjson.loads),
        lambda t, k, v: Record(
            t, k.encode()[cut[t] : -1], v.encode(), (), keys[t], values[t], _boundary(t, v)
        ),
    )
    (out / "_DONE_ORDERED").touch()
    return out


def json_lines_log(records: str, out: Path) -> Path:
    """The same records in the embedded log's JSON-lines form, as the streamer writes them
    there (values with their Connect schemas), by the log's own writer in the streamer's
    order, 20,000 to a flush, so the writer records its cuts as it does in the streamer."""
    from cdc_core.events.envelope import Record
    from cdc_core.sinks.local_log import LocalEventLog

    if (out / "_DONE").exists():
        return out
    shutil.rmtree(out, ignore_errors=True)
    _write_log(
        LocalEventLog(out, fsync=False),
        _in_stream_order(records, lambda value: orjson.loads(value)["payload"]),
        lambda t, k, v: Record(t, k.encode(), v.encode(), boundary=_boundary(t, v)),
    )
    (out / "_DONE").touch()
    return out


def _write_log(log: Any, rows: list[tuple[str, str, str]], record: Callable[[str, str, str], Any]) -> None:
    """`rows` appended to an embedded log's writer as the streamer hands them over, 20,000
    to a flush (where the writer records its cuts), then the writer closed."""
    for start in range(0, len(rows), 20_000):
        log.append(record(*row) for row in rows[start : start + 20_000])
        log.flush()
    log.close()


def _in_stream_order(records: str, payload: Callable[[str], dict]) -> list[tuple[str, str, str]]:
    """(topic, key, value) of every record in a Parquet folder, in the streamer's order.
    Spark's reader does not keep the files' order: back to the streamer's, transaction by
    transaction (its BEGIN, its events, its END), which is what the log's cuts rely on.
    `payload`: a value's payload (parsed)."""
    import pyarrow.parquet as pq

    rows: list[tuple[str, str, str]] = []
    for part in sorted(Path(records).glob("*.parquet")):
        table = pq.read_table(part, columns=["topic", "key", "value"])
        rows += zip(*(table.column(c).to_pylist() for c in ("topic", "key", "value")), strict=True)
    rows.sort(key=lambda row: _stream_position(row[0], payload(row[2])))
    return rows


def _stream_position(topic: str, value: dict) -> tuple[int, int]:
    """(transaction rank, place in it) of a record, from its payload: BEGIN first, END last."""
    if topic == f"{PREFIX}.transaction":
        rank = int(value["id"].rsplit("-", 1)[1])
        return rank, 0 if value["status"] == "BEGIN" else 1 << 30
    return value["transaction"]["transaction_rank"], value["transaction"]["total_order"]


def _boundary(topic: str, payload: str) -> str | None:
    """What the streamer's record writer marks a transaction's BEGIN and END with."""
    if topic != f"{PREFIX}.transaction":
        return None
    return "BEGIN" if '"status":"BEGIN"' in payload else "END"


def deduplicated(spark, records: str, out: str) -> None:
    """The same batch parsed and reduced to the newest event per key, in the table's
    types: the bare MERGE's input, prepared outside its timing."""
    from spark_jobs.merge.batches import parsed_batch
    from spark_jobs.merge.changes import newest_per_key, table_changes

    with parsed_batch(spark.read.parquet(records), PREFIX) as (parsed, shapes):
        (changes,) = table_changes(parsed, {TOPIC}, shapes)
        newest_per_key(changes.rows, changes.key_columns).write.mode("overwrite").parquet(out)


def prepared(spark, work: Path, size: int, count: int, txn_size: int) -> tuple[str, str, str]:
    """The base table, the events and their deduplicated form (kept under `work` and
    reused when `--work` names a folder that has them)."""
    base = str(work / f"base-{size}")
    records, deduped = (
        str(work / f"events-{count}-{size}-{txn_size}-positioned"),
        str(work / f"dedup-{count}-{size}-{txn_size}"),
    )
    if not Path(base, "_delta_log").is_dir():
        base_table(spark, base, size)
    keyed(spark, base)  # also a base prepared before the key was kept with it
    if not Path(records, "_SUCCESS").exists():
        events(spark, records, count, size, txn_size)
    if not Path(deduped, "_SUCCESS").exists():
        deduplicated(spark, records, deduped)
    return base, records, deduped
