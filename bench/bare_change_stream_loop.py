"""The Python floors of the MongoDB benchmark, each run as a child process so its peak RSS
is its own.

    python -m bench.bare_change_stream_loop stream URI DB COLL SEC INC EXPECTED
        a pymongo change stream on DB.COLL from cluster time SEC.INC, full documents
        looked up as the connector's change_streams_update_full asks, iterated until
        EXPECTED events, nothing else done with them;
    python -m bench.bare_change_stream_loop scan URI DB COLL PARTS
        the collection read by PARTS processes, each a find() of its share of the `_id`
        range sorted by `_id`, every document decoded.

Prints: count seconds peak_rss_mb.
"""

from __future__ import annotations

import resource
import sys
import time
from multiprocessing import Pool
from typing import Any


def _client(uri: str) -> Any:
    import pymongo

    return pymongo.MongoClient(uri, serverSelectionTimeoutMS=10_000)


def stream(uri: str, db: str, coll: str, sec: int, inc: int, expected: int) -> int:
    from bson import Timestamp

    client = _client(uri)
    n = 0
    with client[db][coll].watch(
        start_at_operation_time=Timestamp(sec, inc), full_document="updateLookup", max_await_time_ms=500
    ) as changes:
        while n < expected:
            if changes.try_next() is not None:
                n += 1
    return n


def _read_part(args: tuple[str, str, str, int, int]) -> int:
    uri, db, coll, lo, hi = args
    client = _client(uri)
    query = {"_id": {"$gte": lo, "$lt": hi}}
    return sum(1 for _ in client[db][coll].find(query).sort("_id", 1).batch_size(10_000))


def scan(uri: str, db: str, coll: str, parts: int) -> int:
    client = _client(uri)
    ends = [d["_id"] for d in client[db][coll].find({}, {"_id": 1}).sort("_id", 1).limit(1)]
    ends += [d["_id"] for d in client[db][coll].find({}, {"_id": 1}).sort("_id", -1).limit(1)]
    lo, hi = ends[0], ends[1] + 1
    step = (hi - lo + parts - 1) // parts
    ranges = [(uri, db, coll, lo + i * step, min(hi, lo + (i + 1) * step)) for i in range(parts)]
    with Pool(parts) as pool:
        return sum(pool.map(_read_part, ranges))


def main(argv: list[str]) -> int:
    started = time.perf_counter()
    if argv[0] == "stream":
        uri, db, coll, sec, inc, expected = argv[1:7]
        n = stream(uri, db, coll, int(sec), int(inc), int(expected))
    else:
        uri, db, coll, parts = argv[1:5]
        n = scan(uri, db, coll, int(parts))
    seconds = time.perf_counter() - started
    usage = max(
        resource.getrusage(resource.RUSAGE_SELF).ru_maxrss,
        resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss,
    )
    print(n, f"{seconds:.3f}", f"{usage / 1024:.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
