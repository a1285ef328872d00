"""The ad-hoc snapshot form: Params with a JSON schema (the UI renders and enforces it),
and the step that turns a filled form into an execute-snapshot signal.

The schema catches shape errors before a run exists; `build_request` then applies the
same rules the streamer applies to any signal (and checks the tables, filters and keys
against the live database), so a bad request fails in its first task with the reason
instead of timing out waiting for a snapshot the streamer refused.
"""

from __future__ import annotations

from typing import Any

from airflow.sdk import Param

from cdc_core.errors import TidemarkError

MAX_CHUNK = 1_000_000


def snapshot_params(connector_names: list[str]) -> dict[str, Param]:
    names = sorted(connector_names) or ["(no connectors configured)"]
    return {
        "connector": Param(names[0], type="string", enum=names, title="Connector"),
        "data_collections": Param(
            [],
            type="array",
            minItems=1,
            uniqueItems=True,
            items={"type": "string", "minLength": 1, "format": "regex"},
            title="Data collections",
            description="Tables to snapshot, as db.table regexes (within the connector's capture list).",
        ),
        "snapshot_type": Param(
            "incremental", type="string", enum=["incremental", "blocking"], title="Snapshot type"
        ),
        "additional_conditions": Param(
            [],
            type="array",
            items={
                "type": "object",
                "properties": {
                    "data-collection": {"type": "string", "minLength": 1, "format": "regex"},
                    "filter": {"type": "string", "minLength": 1, "maxLength": 1000},
                },
                "required": ["data-collection", "filter"],
                "additionalProperties": False,
            },
            title="Additional conditions",
            description='e.g. [{"data-collection": "shop.orders", "filter": "status = \'open\'"}]; '
            "filters use a restricted grammar over the table's columns.",
        ),
        "surrogate_key": Param(
            None,
            type=["null", "string"],
            minLength=1,
            title="Surrogate key",
            description="For tables without a primary key.",
        ),
        "chunk_size": Param(1024, type="integer", minimum=1, maximum=MAX_CHUNK, title="Chunk size"),
        "parallelism": Param(
            2,
            type="integer",
            minimum=1,
            maximum=64,
            title="Parallelism",
            description="Windows read at once by Spark.",
        ),
        "release_mode": Param(
            "lakehouse",
            type="string",
            enum=["lakehouse", "stream"],
            title="Release mode",
            description="lakehouse: the merge reads staged rows directly; stream: rows become op=r events.",
        ),
    }


FIELDS = frozenset(snapshot_params([]))


def unknown_fields(form: dict[str, Any]) -> list[str]:
    """Fields the form does not have (Airflow keeps any extra key of a run's conf as a
    param of its own, so a misspelt field would be ignored, its default used)."""
    return sorted(set(form) - FIELDS)


def signal_data(form: dict[str, Any]) -> dict[str, Any]:
    """The execute-snapshot signal's data for a filled form. Blocking snapshots are read
    by the streamer itself while streaming waits, so they take no Spark job."""
    blocking = form.get("snapshot_type") == "blocking"
    data: dict[str, Any] = {
        "data-collections": list(form["data_collections"]),
        "type": form.get("snapshot_type") or "incremental",
        "tidemark.chunk-size": int(form["chunk_size"]),
    }
    if not blocking:
        data["tidemark.reader"] = "spark"
        data["tidemark.release"] = form.get("release_mode") or "lakehouse"
    if form.get("additional_conditions"):
        data["additional-conditions"] = [dict(c) for c in form["additional_conditions"]]
    if form.get("surrogate_key"):
        data["surrogate-key"] = form["surrogate_key"]
    return data


def build_request(config: Any, form: dict[str, Any]) -> dict[str, Any]:
    """Validate a filled form against the signal rules and the live database; the
    request the DAG's next steps use, or a TidemarkError saying what is wrong."""
    from cdc_core.connectors.registry import connector_of
    from cdc_core.signals.actions import ExecuteSnapshot, RawSignal, parse_signal
    from cdc_core.snapshot.requests import check_snapshot_request

    unknown = unknown_fields(form)
    if unknown:
        raise TidemarkError(
            f"unknown form field(s) {', '.join(unknown)}; the form's fields are {', '.join(sorted(FIELDS))}"
        )
    if not config.get("signal.data.collection"):
        raise TidemarkError(
            f"connector {config.name} has no signal.data.collection: it cannot take snapshot signals"
        )
    if "source" not in config.get("signal.enabled.channels"):
        raise TidemarkError(
            f"connector {config.name} does not read signals from its signal table (signal.enabled.channels: "
            f"{', '.join(config.get('signal.enabled.channels'))}): add source to take snapshot signals"
        )
    data = signal_data(form)
    action = parse_signal(RawSignal("form", "execute-snapshot", data, "airflow"))
    assert isinstance(action, ExecuteSnapshot)
    tables = check_snapshot_request(connector_of(config), config, action)
    return {
        "connector": config.name,
        "signal": data,
        "reader": action.reader,
        "parallelism": int(form.get("parallelism") or 1),
        "tables": tables,
    }


def backfill_form(tables: list[str], start: Any, end: Any) -> dict[str, Any]:
    """The form a backfill run fills in: each `db.table:column` re-read for the rows whose
    column lies in [start, end) (the run's data interval, as UTC timestamps)."""
    conditions, collections = [], []
    for entry in tables:
        table, column = entry.rsplit(":", 1)
        pattern = table.replace(".", r"\.")
        collections.append(pattern)
        lo, hi = (t.strftime("%Y-%m-%d %H:%M:%S") for t in (start, end))
        quoted = "`" + column.replace("`", "``") + "`"  # any name the config takes, as the grammar reads it
        conditions.append({"data-collection": pattern, "filter": f"{quoted} >= '{lo}' AND {quoted} < '{hi}'"})
    return {
        "data_collections": collections,
        "snapshot_type": "incremental",
        "additional_conditions": conditions,
        "chunk_size": 1024,
        "parallelism": 2,
        "release_mode": "lakehouse",
    }
