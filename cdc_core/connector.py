"""The connector contract: everything Tidemark asks of one kind of source, in one place.

A source is one folder under `cdc_core/connectors/<source>/` whose package names a
`CONNECTOR` object satisfying `Connector` (the registry, `cdc_core.connectors.registry`,
imports it by name when a connector of its class runs). Nothing outside that folder
imports it: the streamer, the CLI, the Airflow plugins, the Spark jobs and the scripts
reach a source only through these protocols, as Flink CDC's pipeline reaches a database
only through its `DataSourceDialect`.

What a connector provides:

- `properties` (validated and documented with the common ones), `create_source` (the log
  reader the pipeline drives, `cdc_core.source.Source`), `describe_position` (an offset's
  position for people);
- `open_session`: a plain connection for snapshot work and signals (`SourceSession`): table
  listing and definitions, the type mapping, chunk boundaries and reads, watermark and
  signal writes, the log position marker of read-only snapshots;
- `spark_reader`: optionally, a way for the Spark chunk job to read windows in the JVM
  (`SparkWindowReader`); without one, the job reads windows with the session on its
  executors;
- `document_patches`: for a document source whose update events may carry their change
  alone, how the Delta merge applies such a change to the stored document
  (`DocumentPatches`); None for sources whose events carry whole rows;
- `document_ids`: for a document source, its record keys' text as the Delta table's
  `_id` (`DocumentIds`); None for sources of rows.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from cdc_core.config.properties import Property
from cdc_core.schema.model import Column, TableId, TableSchema
from cdc_core.snapshot.chunks import ChunkSource

if TYPE_CHECKING:
    from cdc_core.config.connector_config import ConnectorConfig
    from cdc_core.schema.history import SchemaHistory
    from cdc_core.signals.actions import RawSignal
    from cdc_core.snapshot.chunks import ChunkPlan, Key
    from cdc_core.snapshot.staged_form import StagedForm
    from cdc_core.source import ColumnMapping, Source, TypeMapper


class PositionWatermarks(Protocol):
    """Read-only snapshots: log positions stand in for watermark rows. A window's chunk is
    read after its opening position was recorded, and released once the log has passed
    the `marker` (`SourceSession.position_marker`) read right after the chunk."""

    def passed(self, position: Mapping[str, Any], marker: str) -> bool:
        """Whether the log at `position` (an offset's source part) is past `marker`."""
        ...

    def order(self, position: Mapping[str, Any]) -> tuple[int, int]:
        """(epoch, rank) of `position`, as `OrderKey` orders transactions."""
        ...

    def source_block(self, position: Mapping[str, Any], table: TableId | None, ts_ms: int) -> dict[str, Any]:
        """The `source` block of an event released at `position`."""
        ...


class SourceSession(ChunkSource, Protocol):
    """One plain connection to the source for snapshots and signals (not the log)."""

    def list_tables(self) -> list[TableId]:
        """Every table the connection can see (the capture filters apply afterwards)."""
        ...

    def table_schema(self, table: TableId) -> TableSchema:
        """The table's definition now."""
        ...

    def type_mapper(self) -> TypeMapper:
        """The connector's type mapping for this source (picklable: Spark executors use it)."""
        ...

    def read_signal(self, signal_id: str) -> RawSignal | None:
        """The signal `signal_id` from the signal collection, or None."""
        ...


class EventFormChunks(Protocol):
    """What a session may offer the Spark chunk job's Python reader besides `read_chunk`:
    a window's rows already in event form, column by column, each value what the table's
    type mapping (`TypeMapper.map_column(...).convert`) makes of the value read. A source
    that renders them without building Python values per row (MongoDB's transcoder) saves
    the reader most of its time. None: not available here; the reader uses `read_chunk`."""

    def read_chunk_events(self, plan: Any, lo: Any, hi: Any) -> Mapping[str, list[Any]] | None: ...


class SparkWindowReader(Protocol):
    """The Spark chunk job's JVM path: a batch of windows read with one Spark read, one
    partition per window, in the order given."""

    sql_conf: Mapping[str, str]  # session settings the reads need

    def unreadable(self, form: StagedForm, lakehouse: bool) -> list[str]:
        """Columns this path cannot stage exactly (each as `name (reason)`); the table then
        goes to the Python reader."""
        ...

    def read(
        self, spark: Any, form: StagedForm, plan: ChunkPlan, windows: Sequence[tuple[Key | None, Key | None]]
    ) -> Any:
        """A DataFrame of the table's source columns, partition i holding window i's rows."""
        ...

    def staged_column(self, frame: Any, column: Column, mapping: ColumnMapping, lakehouse: bool) -> Any:
        """The Spark column a source column is staged as: as read (stream release) or as
        the Delta merge would land its events (lakehouse release)."""
        ...


@dataclass(frozen=True)
class DocumentPatches:
    """A document source's partial updates: `field` is the envelope field an update's
    change is in (its JSON text reaches `apply`), `apply(document, change)` the document's
    JSON text (as `after` carries it) with the change applied, or None without a document.
    `apply` runs on Spark's executors: a module-level function."""

    field: str
    apply: Callable[[str | None, str], str | None]


@dataclass(frozen=True)
class DocumentIds:
    """A document source's record keys as its Delta tables' `_id` column: `landed(text)`
    rewrites the key's text in the form the landed documents write values, so a row's
    `_id` reads as the `_id` in its `document`. It depends on the key's text alone (every
    event of a document, with or without the document, lands under one `_id`) and runs
    on Spark's executors (a module-level function). `plain`: a regex of key texts that
    are their own landed form, which the merge keeps without calling `landed`."""

    landed: Callable[[str | None], str | None]
    plain: str


class Connector(Protocol):
    """One kind of source (see the module docstring)."""

    name: str  # the `source.connector` family, e.g. "mysql"
    title: str  # for people, e.g. "MySQL/MariaDB"
    system_databases: frozenset[str]  # the source's own, never captured whatever the filters say
    # True when the log reader takes `snapshot.mode: initial`'s snapshot itself (Vitess:
    # VStream's copy phase); otherwise the streamer snapshots every captured table
    # incrementally at first start.
    initial_snapshot_in_log: bool
    properties: Sequence[Property]
    document_patches: DocumentPatches | None
    document_ids: DocumentIds | None

    def create_source(self, config: ConnectorConfig, history: SchemaHistory) -> Source: ...

    def initial_snapshot_done(self, position: Mapping[str, Any]) -> bool:
        """Whether the log at `position` (an offset's source part) is past the initial
        snapshot the log reader takes itself (`initial_snapshot_in_log`); True for a
        connector whose log has none."""
        ...

    def open_session(self, config: ConnectorConfig) -> SourceSession:
        """A new connection as the connector's user (a clear TidemarkError when it cannot)."""
        ...

    def describe_position(self, position: Mapping[str, Any]) -> str:
        """An offset's source position as people read it (logs, `tidemark status`)."""
        ...

    def describe_source(self, config: ConnectorConfig) -> str:
        """Where the source is, as people read it (the status page); never a credential."""
        ...

    def spark_reader(self, config: ConnectorConfig) -> SparkWindowReader | None:
        """The Spark job's JVM window reader, or None (windows are read by Python)."""
        ...
