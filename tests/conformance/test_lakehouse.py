"""Conformance: the whole stream of a source, changes and an incremental snapshot, merged
into Delta by the generic merge, equals the source; merging it all again from the start
changes nothing."""

from __future__ import annotations

import shutil

import pytest

from tests.conformance.source_fixture import Delete, Insert, Update, insert_rows
from tests.conformance.test_snapshots import seeded, signal, synced
from tests.support.snapshots import finished
from tests.support.streamer import start_process, stop_process, wait_for

pytestmark = [pytest.mark.integration, pytest.mark.conformance]


def delta_rows(spark, root: str, source, ns: str, table: str) -> list[dict]:
    """The Delta table of `table` (`table` as its topic names it) as the suite's rows."""
    from spark_jobs.merge.delta_apply import live_rows

    name = f"{ns}.{table}"
    frame = live_rows(spark, f"{root}/{name}")
    rows = (source.row(r.asDict()) for r in frame.collect())
    return sorted(rows, key=lambda r: tuple(str(v) for v in r.values()))


# The embedded log's forms: values with their Connect schema, schemaless naming it by
# reference (`<prefix>.schemas`), or Parquet files (`sink.local.format: parquet`).
FORMS = {
    "with schemas": {"sink.local.format": "json"},
    "schemas by reference": {
        "sink.local.format": "json",
        "value.converter.schemas.enable": False,
        "key.converter.schemas.enable": False,
    },
    "parquet log": {"sink.local.format": "parquet"},
}


@pytest.mark.parametrize("values", list(FORMS))
def test_the_stream_merged_into_delta_equals_the_source(source, ns, tmp_path, spark, values):
    from spark_jobs.delta_merge import run_local

    seeded(source, ns, 400)
    # Names Delta takes only with column mapping (a space, a comma, an equals sign), and
    # names Spark reads as syntax unless quoted (a dot, a backtick), in the key too.
    a, b, v = "a b.c", "b,c`d", "v=1"
    # A table named with characters Kafka refuses in a topic name (a space, a euro sign) and
    # a dot: captured on `<prefix>.<ns>.pairs__.x`, as Debezium names it.
    pairs, topic = "pairs €.x", "pairs__.x"
    source.create_table(ns, pairs, {a: "int", b: "text", v: "int"}, [a, b])
    extra = {"incremental.snapshot.chunk.size": 64, **FORMS[values]}
    c = source.connector(tmp_path / "connector", ns, extra)
    proc = start_process(c)
    try:
        wait_for(lambda: (c.state / "status.json").exists(), 60, message="the streamer to start")
        source.apply(ns, insert_rows(pairs, [{a: 1, b: "x", v: 1}, {a: 1, b: "y", v: 2}]))
        collections = [source.collection(ns, "t"), source.collection(ns, pairs)]
        snap = signal(c, "execute-snapshot", {"data-collections": collections})
        source.apply(
            ns, [Update("t", {"id": 5}, {"v": 9}), Delete("t", {"id": 6}), Insert("t", {"id": 1000, "v": 1})]
        )
        source.apply(ns, [Update(pairs, {a: 1, b: "x"}, {b: "z"}), Update("t", {"id": 7}, {"id": 700})])
        source.apply(ns, [Insert(pairs, {a: 2, b: "x", v: 3}), Delete(pairs, {a: 1, b: "y"})])
        wait_for(lambda: finished(c, snap) is not None, 120, interval=0.3, message="the snapshot to finish")
        synced(source, ns, c)
        assert stop_process(proc) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
    root, checkpoint = str(tmp_path / "delta"), str(tmp_path / "checkpoint")
    config = c.config()
    assert run_local(spark, config, root, checkpoint) >= 2
    for table, named in (("t", "t"), (pairs, topic)):
        assert delta_rows(spark, root, source, ns, named) == source.rows(ns, table), table
    if values != "with schemas":
        return  # (merging again is the same code either way)
    shutil.rmtree(checkpoint)  # the whole log again: idempotent
    run_local(spark, config, root, checkpoint)
    for table, named in (("t", "t"), (pairs, topic)):
        assert delta_rows(spark, root, source, ns, named) == source.rows(ns, table), table


def test_a_table_dropped_and_created_again_lands_as_the_source_holds_it(source, ns, tmp_path, spark):
    """A table dropped after its first merge and created again, an old key reused; another
    dropped for good: the first holds only the new table's
    rows, the second none; merging it all again from the start gives the same."""
    from spark_jobs.delta_merge import run_local

    if not source.drops_ordered:
        pytest.skip(f"{source.name}: a drop comes once per shard, in no order the merge can end rows at")
    for table in ("d", "gone"):
        source.create_table(ns, table, {"id": "int", "v": "int"}, ["id"])
    source.create_table(ns, "marker", {"id": "int"}, ["id"])
    c = source.connector(tmp_path / "connector", ns, {"include.schema.changes": True})
    root, checkpoint = str(tmp_path / "delta"), str(tmp_path / "checkpoint")
    proc = start_process(c)
    try:
        wait_for(lambda: (c.state / "status.json").exists(), 60, message="the streamer to start")
        source.apply(ns, insert_rows("d", [{"id": i, "v": i} for i in range(1, 4)]))
        source.apply(ns, insert_rows("gone", [{"id": 1, "v": 1}]))
        synced(source, ns, c)
        run_local(spark, c.config(), root, checkpoint)
        source.drop_table(ns, "d")
        source.create_table(ns, "d", {"id": "int", "v": "int"}, ["id"])
        source.apply(ns, insert_rows("d", [{"id": 1, "v": 10}, {"id": 7, "v": 70}]))
        source.drop_table(ns, "gone")
        synced(source, ns, c)
        assert stop_process(proc) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
    for check in (checkpoint, str(tmp_path / "again")):
        run_local(spark, c.config(), root, check)
        assert delta_rows(spark, root, source, ns, "d") == source.rows(ns, "d")
        assert delta_rows(spark, root, source, ns, "gone") == []
