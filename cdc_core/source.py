"""The seam between the generic pipeline and a source connector.

A connector turns its database log into a stream of `LogItem`s, in log order, each
carrying the position to restart from. The pipeline (one door: `Dispatcher`) does the
rest — filtering, masking, transaction metadata and order keys, serialisation, the sink,
offsets — identically for every source. In the spirit of Flink CDC's DataSourceDialect
and Debezium's ChangeEventSource, nothing source-specific crosses this seam except the
opaque position dictionaries and the `source` block of each event.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from cdc_core.events.connect_schema import Schema
from cdc_core.schema.model import Column, TableId, TableSchema

if TYPE_CHECKING:
    from cdc_core.connector import PositionWatermarks, SourceSession
    from cdc_core.events.envelope import ChangeEvent
    from cdc_core.filters import ColumnRules
    from cdc_core.snapshot.staged_form import StagedForm


@dataclass(slots=True)
class TransactionBegin:
    """A source transaction starts. `restart` is where to resume to re-read it whole;
    `epoch`/`rank` order it against every other transaction (see `OrderKey`)."""

    id: str
    epoch: int
    rank: int
    ts_ms: int
    restart: dict[str, Any]
    # For a transaction that is not in the log (a read-only snapshot release): the id the
    # snapshot stage replays it by, when a restart resumes inside it.
    synthetic: str | None = None
    # Whether reading the log again from `restart` gives this transaction again, row for
    # row. One that does not (a Vitess copy-phase batch: the copy resumes at a newer
    # snapshot) is never resumed inside: after a crash in it, what was delivered of it is
    # closed with its END, and the log is read again from `restart` (at least once).
    replayable: bool = True
    # A change the source does not count as a transaction (a MongoDB write outside a
    # multi-document transaction, as Debezium's MongoDB connector sees it): its event
    # carries the ordered block with a null `id`, and no BEGIN or END is written. The
    # Delta merge takes such an event as complete by itself.
    standalone: bool = False


@dataclass(slots=True)
class RowChange:
    """One changed row, values positional in `table`'s column order (the schema the
    table had when the change was written). `source` is the connector's source block
    without `db`/`table`/`snapshot`, which the pipeline adds."""

    table: TableSchema
    op: str
    before: tuple[Any, ...] | None
    after: tuple[Any, ...] | None
    source: dict[str, Any]
    ts_ms: int
    # A snapshot read released from a Spark-staged window: `after` is in that staged form
    # (the column rules already applied to the columns they change), not the table's.
    staged: StagedForm | None = None
    # Envelope fields of the source's own beside before/after (MongoDB's updateDescription).
    extra: dict[str, Any] | None = None


@dataclass(slots=True)
class TransactionCommit:
    """The current transaction committed; `position` resumes after it."""

    position: dict[str, Any]
    ts_ms: int


@dataclass(slots=True)
class SchemaChange:
    """A change of table definitions, applied to the schema timeline as entry `history_seq`.

    `ddl` is the statement where the source has one (None for a document source, whose
    collections change shape without DDL: the schema-change event then carries the new
    definitions alone). `tables` are the affected tables' schemas after the change (a
    dropped table is absent); `position` resumes after the change.
    """

    ddl: str | None
    database: str | None
    kind: str
    affected: tuple[TableId, ...]
    tables: tuple[TableSchema, ...]
    source: dict[str, Any]
    position: dict[str, Any]
    history_seq: int
    ts_ms: int
    # (epoch, rank): where the change falls among the source's transactions (`OrderKey`),
    # when the source orders it, and the tables whose rows end there (dropped, renamed
    # away, replaced): they go with the record (`ORDER_HEADER`, `ENDS_HEADER`) so the Delta
    # merge ends those tables' rows where the source did.
    order: tuple[int, int] | None = None
    ends: tuple[TableId, ...] = ()


@dataclass(slots=True)
class PositionAdvance:
    """The log moved past things that produce no event (other tables, heartbeats)."""

    position: dict[str, Any]
    ts_ms: int


@dataclass(slots=True)
class SkippedEvent:
    """An event the source could not process and left out, as
    `event.processing.failure.handling.mode` (`warn`, `skip`) lets it: counted in the
    streamer's status, with where it was and why. It moves no position: the item after
    it does (a `PositionAdvance`, or its transaction's commit). `key` is the row's key as
    text when it could be read; never the row's contents."""

    table: TableId | None
    key: str | None
    where: str  # its place in the log, as the source names it
    reason: str
    ts_ms: int


@dataclass(slots=True)
class StateChange:
    """The snapshot state changed at this point of the log (a signal, a watermark, a
    release); offsets from here on carry `snapshot`. Made by the snapshot stage."""

    snapshot: dict[str, Any] | None


@dataclass(slots=True)
class SnapshotRelease:
    """Lakehouse fast path: a window released where its rows are staged, instead of as
    events. The dispatcher gives it the order key of its place in the log (the HW's)."""

    table: TableSchema
    snapshot: str
    window: str
    staged: str
    rows: int
    key_columns: tuple[str, ...]
    excluded_keys: list[tuple[Any, ...]]
    source: dict[str, Any]
    ts_ms: int


@dataclass(slots=True)
class RenderedChanges:
    """Changes of one table, each outside any transaction, whose records the source
    rendered itself (compiled code): `rows` are `(op, key, payload)` with the key and the
    value's payload as JSON bytes, exactly what the table's shaper and the dispatcher
    would have written for the same `TransactionBegin(standalone=True)`, `RowChange`,
    `TransactionCommit` items, processing time aside. `position` is where the log stands
    after the last; `ts_ms` the last one's source time.

    Wherever a change must be looked at one by one (an open snapshot window on the table,
    a restart inside a transaction), `expand()` gives those items instead."""

    table: TableSchema
    rows: list[tuple[str, bytes, bytes]]
    position: dict[str, Any]
    ts_ms: int
    expand: Callable[[], list[Any]]


LogItem = (
    TransactionBegin
    | RowChange
    | TransactionCommit
    | SchemaChange
    | PositionAdvance
    | StateChange
    | SnapshotRelease
    | RenderedChanges
    | SkippedEvent
)


def IDENTITY(v: Any) -> Any:
    """A column whose log values are already in event form; row shaping skips calling it."""
    return v


@dataclass(frozen=True)
class ColumnMapping:
    """How one column appears in events: its Connect field schema and the converter from
    the log's value to the JSON-ready event value."""

    schema: Schema
    convert: Callable[[Any], Any]
    # The event value is the column's own characters (CHAR, TEXT, ENUM, ...): the only
    # values `column.truncate.to.N.chars` cuts. A timestamp's or a decimal's event value
    # is a string too, but a cut one would no longer read as a timestamp or a decimal.
    text: bool = False


class Shaper(Protocol):
    """One table's rows as events: key and row images, and the envelope around them."""

    topic: str
    key_schema: Schema | None
    key_plan: Any  # truthy when the table has a key

    def key(self, values: tuple[Any, ...]) -> dict[str, Any] | None: ...

    def key_values(self, values: tuple[Any, ...]) -> tuple[Any, ...]: ...

    def row(self, values: tuple[Any, ...] | None) -> Any: ...

    def envelope_schema(self, source: Schema, ordered: bool) -> Schema:
        """The value's Connect schema."""
        ...

    def payload(self, event: ChangeEvent) -> dict[str, Any]:
        """The value's payload, in the envelope's field order."""
        ...


class TypeMapper(Protocol):
    def map_column(self, column: Column, optional: bool | None = None) -> ColumnMapping: ...

    def key_value(self, column: Column) -> Callable[[Any], Any]:
        """The canonical form of the column's values as a chunk key: one value (equal,
        hashing alike, and ordered as the source orders it where Python can) for one stored
        value, whether the log, a chunk read or a staged file gave it."""
        ...

    def key_event_value(self, column: Column) -> Callable[[Any], Any]:
        """A canonical key value (`key_value`'s) as the column's event value, as a
        snapshot release names the keys it leaves out and the merge compares them with the
        staged rows. Where the canonical form is a source value, `map_column`'s convert."""
        ...

    def staged_digest(self, table: TableId) -> str:
        """What shapes a snapshot's staged rows of `table` beside the column rules (a
        document source's field rules), as text: part of the staged form's digest, so rows
        staged under other settings are read again rather than released. Empty: nothing."""
        ...


@dataclass
class SourceStatus:
    """What `tidemark status` and the status line show about the source."""

    connector: str
    position: str
    # The source's newest position, or why it cannot be read ("unreachable: ...",
    # "refused: ..."), naming no secret; `tidemark status` says "unknown" for a None.
    head: str | None = None
    lag_ms: int | None = None
    extra: dict[str, Any] = field(default_factory=dict)


class Source(Protocol):
    """A connector's log reader and everything source-specific the pipeline needs."""

    connector_name: str  # the `source.connector` value, e.g. "mysql"

    def type_mapper(self) -> TypeMapper: ...

    def source_schema(self) -> Schema:
        """Connect schema of the `source` block."""
        ...

    def open(self, offset: Mapping[str, Any] | None) -> None:
        """Connect, check the position can be resumed, and prepare the schema timeline."""
        ...

    def open_after_loss(self, lost: Mapping[str, Any]) -> None:
        """`snapshot.mode: when_needed`, after `open` or `read` raised PositionLostError:
        start as a first start does (the source's position and table definitions now),
        every event's order key above those of the position `lost` (the committed offset's
        source part that could not be resumed), so what comes now orders after everything
        delivered before. A TidemarkError when the source cannot promise that."""
        ...

    def read(self) -> Iterator[list[LogItem]]:
        """Batches of log items in log order; blocks while the log is idle (but yields an
        empty list at least every second so the caller can stop)."""
        ...

    def current_tables(self) -> Mapping[TableId, TableSchema]:
        """The schema timeline at the reader's position (right after `open`: the start)."""
        ...

    def chunk_source(self) -> SourceSession:
        """A new connection for snapshot chunk reads and watermark writes."""
        ...

    def shaper(
        self, schema: TableSchema, topic: str, rules: ColumnRules, staged: StagedForm | None = None
    ) -> Shaper:
        """How a table's rows become events (`filters.RowShaper` for a table of columns;
        a document source shapes its own envelope)."""
        ...

    def partitions(self, table: TableId) -> tuple[str | None, ...]:
        """The parts of the source with a log of their own that `table`'s rows live in, as
        `SourceSession.partitions` gives them (`(None,)` for a source with one log): an
        incremental snapshot reads each part in windows of its own."""
        ...

    def position_watermarks(self) -> PositionWatermarks:
        """For read-only snapshots: this connector's log positions as watermarks (a
        TidemarkError when its positions cannot serve, e.g. MySQL without GTIDs)."""
        ...

    def committed(self, offset: Mapping[str, Any]) -> None:
        """`offset` is on disk: what the source keeps to resume before it can go."""
        ...

    def stop(self) -> None: ...

    def close(self) -> None: ...

    def status(self, offset: Mapping[str, Any] | None) -> SourceStatus: ...

    def describe(self, position: Mapping[str, Any]) -> str: ...
