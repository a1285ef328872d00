"""Properties the Airflow DAGs and the Delta merge read from a connector's file.

They sit next to the capture settings so one file describes a connector end to end: the
DAGs are generated from these files (dags/), and nothing about a connector is configured
in two places. The streamer itself ignores them.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from cdc_core.config.properties import Property

if TYPE_CHECKING:
    from cdc_core.config.connector_config import ConnectorConfig

_TABLE_COLUMN = re.compile(r"[^.:\s]+\.[^.:\s]+:[^.:\s]+")


def _backfill_tables(value: list[str]) -> str | None:
    bad = [v for v in value if not _TABLE_COLUMN.fullmatch(v)]
    if bad:
        return f"expected 'db.table:timestamp_column' entries, got {bad}"
    return None


PROMOTED_TYPES = ("string", "boolean", "int", "bigint", "double", "date", "timestamp")
_DECIMAL = re.compile(r"decimal\(\s*(\d+)\s*,\s*(\d+)\s*\)")


def promoted_fields(entries: list[str]) -> dict[str, list[tuple[str, str]]]:
    """`lakehouse.promoted.fields` per `db.collection`: (field, type) pairs, the type
    normalised (`decimal(12,2)`). Raises ValueError saying what is wrong."""
    out: dict[str, list[tuple[str, str]]] = {}
    for entry in entries:
        path, _, type_text = entry.partition(":")
        table, _, name = path.strip().rpartition(".")
        kind = type_text.strip().lower()
        decimal = _DECIMAL.fullmatch(kind)
        if decimal:
            precision, scale = int(decimal[1]), int(decimal[2])
            kind = f"decimal({precision},{scale})" if 0 < precision <= 38 and scale <= precision else ""
        if (
            not table
            or "." not in table
            or not name
            or (kind not in PROMOTED_TYPES and not decimal)
            or not kind
        ):
            raise ValueError(
                f"{entry!r} is not db.collection.field:type with a type among "
                f"{', '.join(PROMOTED_TYPES)}, decimal(p,s) (p at most 38)"
            )
        if name in ("_id", "document") or name.startswith("_cdc_") or any(c in name for c in "\"'\\`"):
            raise ValueError(f"{entry!r}: {name!r} cannot be a promoted column's name")
        fields = out.setdefault(table, [])
        if any(f == name for f, _ in fields):
            raise ValueError(f"{table}.{name} is promoted twice")
        fields.append((name, kind))
    return out


def _promoted_fields(value: list[str]) -> str | None:
    try:
        promoted_fields(value)
    except ValueError as exc:
        return str(exc)
    return None


def _conn_id(value: str) -> str | None:
    if not re.fullmatch(r"[A-Za-z0-9_.-]+", value):
        return "an Airflow connection id has only letters, digits, '_', '.' and '-'"
    return None


ORCHESTRATION_PROPERTIES: list[Property] = [
    Property(
        "airflow.conn.id",
        "str",
        check=_conn_id,
        description="Airflow connection holding the source's login and password (host and port too, when "
        "set). Without it the password comes from `database.password.env`.",
    ),
    Property(
        "airflow.spark.conn.id",
        "str",
        default="tidemark_spark",
        check=_conn_id,
        description="Airflow Spark connection the chunk, merge and housekeeping jobs are submitted with.",
    ),
    Property(
        "airflow.spark.connect.conn.id",
        "str",
        check=_conn_id,
        description="Airflow Spark Connect connection (type `spark_connect`): when set, the chunk job runs "
        "attached to that long-lived server (`spark_jobs/connect_server.py`) instead of being submitted, so "
        "no driver JVM starts per snapshot; the merge and housekeeping jobs are still submitted.",
    ),
    Property(
        "airflow.streamer.interval.minutes",
        "int",
        default=10,
        minimum=1,
        description="The streamer DAG's schedule: each run supervises the streamer this long (restarting "
        "it after a crash), then the next run takes over from the committed offsets.",
    ),
    Property(
        "airflow.streamer.restarts",
        "int",
        default=3,
        minimum=0,
        description="Restarts of a crashed streamer within one run before the task fails (and alerts).",
    ),
    Property(
        "airflow.streamer.max.lag.seconds",
        "int",
        default=300,
        minimum=1,
        description="The health check fails (and alerts) when the streamer is further behind the source.",
    ),
    Property(
        "airflow.snapshot.timeout.minutes",
        "int",
        default=120,
        minimum=1,
        description="How long a snapshot DAG run waits for every window to be released.",
    ),
    Property(
        "airflow.snapshot.stall.seconds",
        "int",
        default=120,
        minimum=1,
        description="A Spark-read snapshot with windows left, none open or queued, and no watermark for this "
        "long has stalled (the chunk job is not running): the status page says so, and the snapshot DAG runs "
        "the chunk job again.",
    ),
    Property(
        "airflow.backfill.tables",
        "list",
        default=[],
        check=_backfill_tables,
        description="`db.table:column` entries: the backfill DAG re-snapshots each run's data interval of the "
        "table, selected on that timestamp column.",
    ),
    Property(
        "airflow.backfill.schedule",
        "str",
        default="@daily",
        description="The backfill DAG's schedule (cron or preset); its data intervals are what each run re-reads.",
    ),
    Property(
        "airflow.backfill.start.date",
        "str",
        default="2026-01-01",
        description="First data interval of the backfill DAG (ISO date).",
    ),
    Property(
        "lakehouse.delta.root",
        "str",
        description="Folder of this connector's Delta tables, a path or `s3a://` "
        "(default `.local/delta/<name>`).",
    ),
    Property(
        "lakehouse.merge.checkpoint",
        "str",
        description="The merge's checkpoint folder (default `.local/merge/<name>`).",
    ),
    Property(
        "lakehouse.snapshot.staging",
        "str",
        description="Where the Spark chunk job stages windows (default `.local/staging/<name>`).",
    ),
    Property(
        "lakehouse.promoted.fields",
        "list",
        default=[],
        description="Document fields (MongoDB) landed as typed Delta columns beside the document, "
        "`db.collection.field:type` each; types: string, boolean, int, bigint, double, decimal(p,s), "
        "date, timestamp. Extended JSON wrappers are unwrapped; a value that does not convert is null "
        "in the column (the document keeps it). A field added later is filled for the stored rows.",
        check=_promoted_fields,
    ),
    Property(
        "lakehouse.tombstone.retention.hours",
        "int",
        default=168,
        minimum=0,
        description="Housekeeping removes tombstones older than this; must exceed any delivery delay.",
    ),
    Property(
        "lakehouse.vacuum.retention.hours",
        "int",
        default=168,
        minimum=0,
        description="Housekeeping VACUUMs files no longer referenced for this long.",
    ),
]


def lakehouse_locations(config: ConnectorConfig) -> dict[str, str]:
    """Where a connector's Delta tables, merge checkpoint and staged windows live: its
    `lakehouse.*` properties, or `<project>/.local/{delta,merge,staging}/<name>`. The
    Delta merge run by hand, the Airflow operators and the status page all take them
    from here, so they agree."""
    return {
        "delta_root": config.location("lakehouse.delta.root", "delta"),
        "checkpoint": config.location("lakehouse.merge.checkpoint", "merge"),
        "staging": config.location("lakehouse.snapshot.staging", "staging"),
    }
