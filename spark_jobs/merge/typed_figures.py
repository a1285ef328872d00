"""The census of a batch's typed parts, and each topic's lowest and highest order keys,
read on the driver from the typed files' few columns that tell them.

Why not a Spark job: both are tiny results of a scan of five narrow columns. Two Spark
aggregations over the typed files cost about a second each for a million records on two
cores, almost all of it the jobs' own cost; Arrow reads those columns from the same
files in a tenth of a second. The embedded log's files are on the driver's disk already:
the merge lists them and reads their footers there (`spark_jobs.local_log_source`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from spark_jobs.merge.census import Census
from spark_jobs.merge.records import FLAT

Key = tuple[int, int]
# The envelope's fields that make a record one the merge knows (`census.recognised`).
_KINDS = ("p_op", "p_status", "p_data_collection")
_ORDER = ("p_total_order", "p_epoch", "p_rank")
_BATCH_ROWS = 65536


@dataclass(frozen=True)
class FileSpan:
    """Which records of which files a typed part holds: offsets in (`after`, `before`)."""

    files: tuple[str, ...]
    after: int
    before: int | None  # None: to the end


@dataclass(frozen=True)
class Figures:
    census: Census
    # Per topic, the order keys (epoch, rank) of its first and last events (those with a
    # `total_order`); None when an event's order key lacks a part, which only Spark's
    # array ordering (nulls first) settles.
    orders: dict[str, tuple[list[int], list[int]]] | None
    truncating: frozenset[str] = frozenset()  # the topics with a truncate


@dataclass
class _Tally:
    records: int = 0
    unknown: int = 0
    truncates: int = 0
    first: Key | None = None
    last: Key | None = None
    whole_keys: bool = True  # every ordered event has an epoch and a rank

    def add(self, other: _Tally) -> None:
        self.records += other.records
        self.unknown += other.unknown
        self.truncates += other.truncates
        self.whole_keys = self.whole_keys and other.whole_keys
        for key in (other.first, other.last):
            if key is not None:
                self.first = key if self.first is None else min(self.first, key)
                self.last = key if self.last is None else max(self.last, key)


def typed_figures(
    parts: Sequence[tuple[str, int, str | None, FileSpan]],
) -> Figures:
    """`parts`: (topic, schema id, the part's key without values, the files and offsets). The
    census counts records with a value, as `census.census` does; the order keys are taken
    over the events that number their place in a transaction (`total_order`), as
    `transactions.split_whole` takes them."""
    census: Census = {}
    per_topic: dict[str, _Tally] = {}
    for topic, schema_id, key, span in parts:
        tally = _tally(span)
        n, bad, keys = census.get((topic, schema_id), (0, 0, ()))
        if tally.records:
            shapes = tuple(sorted({*keys, key})) if key is not None else keys
            census[(topic, schema_id)] = (n + tally.records, bad + tally.unknown, shapes)
        per_topic.setdefault(topic, _Tally()).add(tally)
    truncating = frozenset(topic for topic, t in per_topic.items() if t.truncates)
    if not all(t.whole_keys for t in per_topic.values()):
        return Figures(census, None, truncating)
    orders = {
        topic: (list(t.first), list(t.last))
        for topic, t in per_topic.items()
        if t.first is not None and t.last is not None
    }
    return Figures(census, orders, truncating)


def _tally(span: FileSpan) -> _Tally:
    tally = _Tally()
    for path in span.files:
        source = pq.ParquetFile(path)
        value = source.schema_arrow.field("value").type
        columns = {name: FLAT[name] for name in (*_KINDS, *_ORDER) if _has(value, FLAT[name])}
        leaves = ["offset", *(".".join(("value", *p)) for p in columns.values())]
        if not columns:  # nothing of the envelope: any leaf tells whether a value is there
            leaves.append(".".join(("value", *_first_leaf(value))))
        for batch in source.iter_batches(batch_size=_BATCH_ROWS, columns=leaves):
            tally.add(_batch_tally(batch, span, columns))
    return tally


def _batch_tally(batch: pa.RecordBatch, span: FileSpan, columns: dict[str, tuple[str, ...]]) -> _Tally:
    offset = batch.column("offset")
    value = batch.column("value")
    within = pc.greater(offset, span.after)
    if span.before is not None:
        within = pc.and_(within, pc.less(offset, span.before))
    present = pc.and_(within, pc.is_valid(value))
    fields = {name: pc.struct_field(value, list(path)) for name, path in columns.items()}
    records = _count(present)
    known = [pc.is_valid(fields[name]) for name in _KINDS if name in fields]
    unknown = records
    if known:
        recognised = known[0]
        for more in known[1:]:
            recognised = pc.or_(recognised, more)
        unknown = _count(pc.and_(present, pc.invert(recognised)))
    truncates = _count(pc.and_(present, pc.equal(fields["p_op"], "t"))) if "p_op" in fields else 0
    tally = _Tally(records=records, unknown=unknown, truncates=truncates)
    if "p_total_order" not in fields:
        return tally
    ordered = pc.and_(present, pc.is_valid(fields["p_total_order"]))
    if not _count(ordered):
        return tally
    if "p_epoch" not in fields or "p_rank" not in fields:
        tally.whole_keys = False
        return tally
    epoch = pc.filter(fields["p_epoch"], ordered)
    rank = pc.filter(fields["p_rank"], ordered)
    if epoch.null_count or rank.null_count:
        tally.whole_keys = False
        return tally
    tally.first, tally.last = _extreme(epoch, rank, pc.min), _extreme(epoch, rank, pc.max)
    return tally


def _extreme(epoch: pa.Array, rank: pa.Array, pick: Callable[[pa.Array], pa.Scalar]) -> Key:
    """The lowest (`pc.min`) or highest (`pc.max`) order key: epoch first, then rank."""
    at = pick(epoch)
    return (at.as_py(), pick(pc.filter(rank, pc.equal(epoch, at))).as_py())


def _count(mask: pa.Array) -> int:
    return int(pc.sum(pc.cast(mask, pa.int64())).as_py() or 0)


def _has(struct: pa.DataType, path: Iterable[str]) -> bool:
    for name in path:
        if not pa.types.is_struct(struct) or struct.get_field_index(name) < 0:
            return False
        struct = struct.field(name).type
    return True


def _first_leaf(struct: pa.DataType) -> tuple[str, ...]:
    path: list[str] = []
    while pa.types.is_struct(struct) and struct.num_fields:
        path.append(struct.field(0).name)
        struct = struct.field(0).type
    return tuple(path)
