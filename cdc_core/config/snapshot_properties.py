"""The snapshot properties every connector shares: `snapshot.mode`, the watermarking
strategy, and `snapshot.select.statement.overrides` (Debezium's names), with the checks
that need more than one property. A connector that cannot honour one of them declares
its own version (the first declaration wins), refusing with the reason."""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING

from cdc_core.config.properties import Property
from cdc_core.errors import ConfigError

if TYPE_CHECKING:
    from cdc_core.config.connector_config import ConnectorConfig
    from cdc_core.schema.model import TableId, TableSchema

# The modes that snapshot every captured table at first start (and `when_needed` also
# when the committed position can no longer be resumed).
SNAPSHOT_AT_FIRST_START = ("initial", "initial_only", "when_needed")

_ALWAYS = (
    "Tidemark does not snapshot at every start (the offsets resume streaming exactly); take a snapshot when "
    "one is needed with an execute-snapshot signal (`tidemark signal`), or use when_needed to snapshot when "
    "the committed position can no longer be resumed"
)
_RECOVERY = (
    "it rebuilds a lost schema history from today's definitions; Tidemark keeps its schema history in the "
    "state folder, with checkpoints. If it is lost, remove the connector's state folder and start again "
    "with initial or when_needed"
)
_NOT_OFFERED = (
    "not offered by Tidemark; choose one of the values listed in the README's configuration reference"
)

# Debezium's other modes, each with why it is not taken and what to write instead.
REFUSED_MODES: dict[str, str] = {
    "never": "Debezium's deprecated name of no_data: write no_data",
    "schema_only": "Debezium's former name of no_data: write no_data",
    "always": _ALWAYS,
    "recovery": _RECOVERY,
    "schema_only_recovery": _RECOVERY,
    "configuration_based": _NOT_OFFERED,
    "custom": _NOT_OFFERED,
}


def _needs_watermarks(config: ConnectorConfig) -> str | None:
    mode = config.get("snapshot.mode")
    if (
        mode in SNAPSHOT_AT_FIRST_START
        and not config.get("signal.data.collection")
        and not config.get("read.only")
    ):
        return (
            f"{mode} snapshots every captured table incrementally, which needs watermarks: set "
            "signal.data.collection (the signal table the connector's user may write to), or read.only: true "
            "(MySQL/MariaDB with GTIDs)"
        )
    return None


SNAPSHOT_MODE = Property(
    "snapshot.mode",
    "enum",
    default="no_data",
    choices=("no_data", "initial", "initial_only", "when_needed"),
    refused=REFUSED_MODES,
    check_with=_needs_watermarks,
    description="`no_data`: stream from the current position, no rows read. `initial`: at first start (no "
    "offsets), snapshot every captured table incrementally while streaming (streaming never waits). "
    "`initial_only`: the same snapshot, and the streamer stops (exit 0) once no snapshot is running; a later "
    "start stops as soon as it finds none. `when_needed`: as `initial` at first start, and when the committed "
    "position can no longer be resumed (purged binlog, oplog rolled over) the streamer starts again at the "
    'current position and snapshots every captured table instead of failing (see "Incremental snapshots").',
)

WATERMARKING_STRATEGY = Property(
    "incremental.snapshot.watermarking.strategy",
    "enum",
    default="insert_insert",
    choices=("insert_insert", "insert_delete"),
    description="How a snapshot window's watermarks are written to the signal table: `insert_insert`, an open "
    "row and a close row per window; `insert_delete`, the open row is deleted at close instead, so the signal "
    "table does not grow (the connector's user needs DELETE on it). No effect with `read.only`.",
)

OVERRIDES = "snapshot.select.statement.overrides"
_OVERRIDE_PATTERN = r"snapshot\.select\.statement\.overrides\.(.+)"
_NAME = r"(?:`(?:[^`]|``)+`|\"(?:[^\"]|\"\")+\"|[A-Za-z0-9_$-]+)"
_SELECT = re.compile(
    rf"\s*SELECT\s+\*\s+FROM\s+(?P<table>{_NAME}(?:\s*\.\s*{_NAME})?)\s+WHERE\s+(?P<condition>.+)",
    re.I | re.S,
)


def _unquote(name: str) -> str:
    name = name.strip()
    if len(name) > 1 and name[0] == name[-1] and name[0] in '`"':
        return name[1:-1].replace(name[0] * 2, name[0])
    return name


def override_condition(table: str, text: str) -> str:
    """The filter of `table`'s override: the text as written (a condition of the
    `additional-conditions` grammar), or the condition of `SELECT * FROM <table> WHERE
    <condition>`, the one form of a statement taken (its only free part is the condition;
    a column list, a join, an ORDER BY or a LIMIT cannot be said, since a snapshot reads
    whole rows in key order). A ValueError says what is wrong."""
    if not text.strip():
        raise ValueError("is empty: give a condition such as status = 'paid'")
    if not re.match(r"\s*SELECT\b", text, re.I):
        return text.strip()
    found = _SELECT.fullmatch(text)
    if found is None:
        raise ValueError(
            "a statement must be SELECT * FROM <table> WHERE <condition> (no column list, join, ORDER BY or "
            "LIMIT: the snapshot reads whole rows in key order), or give the condition alone"
        )
    parts = [_unquote(p) for p in re.findall(_NAME, found["table"])]
    name = table.partition(".")[2]
    named = ".".join(parts).casefold()
    if named not in (table.casefold(), name.casefold()):
        raise ValueError(f"the statement reads {'.'.join(parts)}, not {table}")
    return found["condition"].strip()


def _override_tables(config: ConnectorConfig) -> dict[str, tuple[str, str]]:
    """`db.table` → (its statement property, its condition text), the list and the
    statements checked against each other and the grammar."""
    from cdc_core.signals.conditions import ANY_FIELD, ConditionError, parse_condition

    listed = config.get(OVERRIDES) or []
    given = {groups[0]: value for groups, value in config.family(f"{OVERRIDES}.DB.TABLE")}
    for table in listed:
        if table not in given:
            raise ConfigError(OVERRIDES, f"lists {table} but {OVERRIDES}.{table} (its filter) is not set")
    found = {}
    for table, text in given.items():
        key = f"{OVERRIDES}.{table}"
        if table not in listed:
            raise ConfigError(
                key, f"{table} is not listed in {OVERRIDES}: add it there, or remove this property"
            )
        if "." not in table:
            raise ConfigError(key, "name the table as <database>.<table> after the property's name")
        try:
            condition = override_condition(table, str(text))
            parse_condition(condition, ANY_FIELD)  # the grammar now; the columns once the table is known
        except (ValueError, ConditionError) as exc:
            raise ConfigError(key, str(exc)) from None
        found[table] = (key, condition)
    return found


def _check_overrides(config: ConnectorConfig) -> str | None:
    _override_tables(config)
    return None


def select_overrides(
    config: ConnectorConfig, tables: Mapping[TableId, TableSchema], captures: Callable[[TableId], bool]
) -> dict[TableId, str]:
    """Each overridden table's condition, checked against its columns now that they are
    known (at the streamer's start): a table that is not captured, or a condition naming
    a column the table lacks, stops the start naming the property."""
    from cdc_core.schema.model import TableId
    from cdc_core.signals.conditions import ConditionError, condition_fields, parse_condition

    found: dict[TableId, str] = {}
    for table, (key, condition) in _override_tables(config).items():
        table_id = TableId.parse(table)
        schema = tables.get(table_id)
        if schema is None or not captures(table_id):
            raise ConfigError(
                key, f"{table} is not a captured table (it is outside the capture list, or does not exist)"
            )
        try:
            parse_condition(condition, condition_fields(schema))
        except ConditionError as exc:
            raise ConfigError(key, str(exc)) from None
        found[table_id] = condition
    return found


def overrides_properties(
    check_with: Callable[[ConnectorConfig], str | None] = _check_overrides, note: str = ""
) -> list[Property]:
    """The two properties of `snapshot.select.statement.overrides` (a connector that
    cannot apply them passes a `check_with` refusing them)."""
    return [
        Property(
            OVERRIDES,
            "list",
            check_with=check_with,
            description="Tables whose `initial` (also `initial_only`, `when_needed`, newly captured tables) and "
            "blocking snapshots read only some rows: `db.t1,db.t2`, each with its filter in "
            f"`{OVERRIDES}.<db>.<table>`. Signalled incremental snapshots read whole tables unless their "
            f"`additional-conditions` filter them, as in Debezium.{note}",
        ),
        Property(
            f"{OVERRIDES}.DB.TABLE",
            "str",
            pattern=_OVERRIDE_PATTERN,
            description="The filter of table DB.TABLE, in the `additional-conditions` grammar (never raw SQL: "
            "values are bound): a condition such as `status = 'paid' AND total > 10`, or "
            "`SELECT * FROM DB.TABLE WHERE <condition>`. Checked at load, and against the table's columns at "
            "start.",
        ),
    ]
