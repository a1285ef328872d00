"""What landing MongoDB documents as their exact Extended JSON text costs the Delta merge,
against the earlier form (a VARIANT parsed from that text, `_id` as the record key's text).

    python -m bench mongodb-landing [--docs N] [--updates N] [--ids objectid|uuid|date]
                                    [--rounds R] [--heap H]

The MongoDB test server holds `--docs` documents of a realistic shape (nested documents
and arrays, dates, decimals, int64s), written while the streamer captures them into the
embedded event log; then `--updates` of them are updated (their whole document looked
up), and captured too. Each form lands the inserts once (untimed); then, `--rounds`
times, a copy of that table and its merge checkpoint takes the updates in one timed
merge (`run_local`: parse, newest per key, MERGE guarded by order key). Printed: each
form's best and median seconds, the ratio text/VARIANT of each round's pair and its
median, and each table's size on disk.

The VARIANT form is the merge of this commit with the document's Delta type and
conversion put back as they were (`connect_types.delta_type`/`convert`), without the
`_id` rewriting: the representation's cost alone, on the same code otherwise. `--ids`
picks the collection's `_id` type: ObjectIds and the other plain keys land as they are,
a UUID's or a date's text is rewritten by Python (`spark_jobs.merge.document_ids`).
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as dt
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from decimal import Decimal
from pathlib import Path
from typing import Any

import orjson

DB = "bench_landing"


def document(i: int, ids: str) -> dict[str, Any]:
    from bson import Binary, Decimal128, Int64, ObjectId

    key: Any = {
        "objectid": ObjectId(i.to_bytes(12, "big")),
        "uuid": Binary.from_uuid(uuid.UUID(int=i)),
        "date": dt.datetime(2020, 1, 1, tzinfo=dt.UTC) + dt.timedelta(milliseconds=i),
    }[ids]
    return {
        "_id": key,
        "customer": {"name": f"customer {i % 5000}", "tier": ["gold", "silver", "bronze"][i % 3], "since": 2000 + i % 25},
        "placed": dt.datetime(2024, 1, 1, tzinfo=dt.UTC) + dt.timedelta(seconds=i),
        "total": Decimal128(Decimal(i % 100_000) / 100),
        "lines": [{"sku": f"sku-{(i + n) % 997}", "qty": n + 1, "price": 1.5 * (n + 1)} for n in range(i % 4 + 1)],
        "status": ["new", "paid", "sent", "done"][i % 4],
        "counter": Int64(i * 1000),
        "flags": {"gift": i % 7 == 0, "express": i % 11 == 0},
    }  # fmt: skip


def write(collection: Any, docs: int, ids: str) -> None:
    for lo in range(0, docs, 1000):
        collection.insert_many([document(i, ids) for i in range(lo, min(docs, lo + 1000))], ordered=False)


def update(collection: Any, updates: int, ids: str) -> None:
    for lo in range(0, updates, 1000):
        keys = [document(i, ids)["_id"] for i in range(lo, min(updates, lo + 1000))]
        collection.update_many(
            {"_id": {"$in": keys}}, {"$set": {"status": "updated"}, "$inc": {"counter": 1}}
        )


def events_total(state: Path) -> int:
    try:
        return int(orjson.loads((state / "status.json").read_bytes())["events_total"])
    except (FileNotFoundError, orjson.JSONDecodeError, KeyError):
        return 0


def captured(config: Path, state: Path, log: Path, count: int, work: Any) -> None:
    """Run the streamer while `work()` writes, until it has logged `count` events (a
    streamer counts its events from its own start)."""
    command = [
        sys.executable,
        "-m",
        "cdc_core.cli",
        "stream",
        "--config",
        str(config),
        "--status-line",
        "never",
    ]
    proc = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=log.open("ab"))
    try:
        while not (state / "status.json").exists():
            if proc.poll() is not None:
                raise SystemExit(f"the streamer exited; see {log}")
            time.sleep(0.1)
        time.sleep(1)  # the stream is open: what is written now is captured
        work()
        while events_total(state) < count:
            if proc.poll() is not None:
                raise SystemExit(f"the streamer exited early; see {log}")
            time.sleep(0.2)
    finally:
        proc.terminate()
        proc.wait(60)


@contextlib.contextmanager
def variant_form() -> Iterator[None]:
    """The merge with documents landed as before: a VARIANT parsed from the text, `_id`
    the key's text (and such a table not refused as stored by an earlier Tidemark)."""
    from pyspark.sql import functions as F
    from pyspark.sql import types as T

    from spark_jobs import delta_merge
    from spark_jobs.merge import connect_types, document_ids

    saved = (
        connect_types.delta_type,
        connect_types.convert,
        document_ids.check_stored,
        delta_merge.configured,
    )

    def delta_type(field: dict[str, Any]) -> Any:
        return T.VariantType() if field.get("name") == connect_types.DOCUMENT else saved[0](field)

    def convert(column: Any, field: dict[str, Any]) -> Any:
        if field.get("name") == connect_types.DOCUMENT:
            return F.from_json(column, T.VariantType(), {"mode": "FAILFAST"})
        return saved[1](column, field)

    def configured(options: Any, config: Any) -> Any:
        from dataclasses import replace

        return replace(saved[3](options, config), document_ids=None)

    connect_types.delta_type, connect_types.convert = delta_type, convert
    document_ids.check_stored = lambda name, stored: None
    delta_merge.configured = configured
    try:
        yield
    finally:
        connect_types.delta_type, connect_types.convert, document_ids.check_stored, delta_merge.configured = (
            saved
        )


FORMS = {"text": contextlib.nullcontext, "variant": variant_form}


def size_mb(path: Path) -> float:
    return sum(f.stat().st_size for f in path.rglob("*.parquet")) / 2**20


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--docs", type=int, default=200_000)
    parser.add_argument("--updates", type=int, default=200_000)
    parser.add_argument("--ids", choices=("objectid", "uuid", "date"), default="objectid")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--heap", default="4g", help="the test server's JVM heap")
    parser.add_argument("--master", default="local[2]")
    args = parser.parse_args(argv)
    updates = min(args.updates, args.docs)

    from spark_jobs.delta_merge import run_local
    from spark_jobs.session import build_session
    from tests.support.mongo.server import MongoTestServer
    from tests.support.streamer import connector_file

    work = Path(tempfile.mkdtemp(prefix="tidemark-bench-landing-"))
    server = MongoTestServer(work / "server", heap=args.heap)
    (work / "server").mkdir()
    server.start()
    try:
        c = connector_file(work / "connector", DB, {
            "connector.class": "mongodb", "mongodb.connection.string": server.uri, "database.user": None,
            "capture.scope": "collection", "capture.target": f"{DB}.orders",
            "capture.mode": "change_streams_update_full",
        }, prefix="benchland")  # fmt: skip
        collection = server.client()[DB]["orders"]
        log = work / "streamer.log"
        t = time.perf_counter()
        captured(c.path, c.state, log, args.docs, lambda: write(collection, args.docs, args.ids))
        print(f"{args.docs:,} inserts captured in {time.perf_counter() - t:.1f}s", flush=True)
        spark = build_session("tidemark-bench-mongodb-landing", args.master)
        config = c.config()
        for form, context in FORMS.items():
            with context():
                run_local(
                    spark, config, str(work / form / "base" / "delta"), str(work / form / "base" / "ckpt")
                )
        t = time.perf_counter()
        captured(c.path, c.state, log, updates, lambda: update(collection, updates, args.ids))
        print(f"{updates:,} updates captured in {time.perf_counter() - t:.1f}s", flush=True)
        seconds: dict[str, list[float]] = {form: [] for form in FORMS}
        for r in range(args.rounds):
            for form, context in FORMS.items():
                run = work / form / f"round-{r}"
                shutil.copytree(work / form / "base", run)
                with context():
                    t = time.perf_counter()
                    run_local(spark, config, str(run / "delta"), str(run / "ckpt"))
                    seconds[form].append(time.perf_counter() - t)
                print(f"round {r + 1}: {form} {seconds[form][-1]:.2f}s", flush=True)
        ratios = [a / b for a, b in zip(seconds["text"], seconds["variant"], strict=True)]
        print(
            f"\n{updates:,} update events into {args.docs:,} documents ({args.ids} _ids), {args.rounds} rounds"
        )
        for form in FORMS:
            table = work / form / "round-0" / "delta"
            print(
                f"  {form:8s} best {min(seconds[form]):6.2f}s  median {statistics.median(seconds[form]):6.2f}s"
                f"  table {size_mb(table):7.1f} MiB"
            )
        print(
            f"  text/VARIANT: best {min(seconds['text']) / min(seconds['variant']):.2f}x, "
            f"median of rounds {statistics.median(ratios):.2f}x (below 1: the text form is faster)"
        )
        spark.stop()
    finally:
        server.stop()
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
