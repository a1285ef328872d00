"""What is captured and how rows are shaped: table and column filters, masking, keys.

Debezium semantics: include/exclude lists are regexes matched against the whole
identifier (`db`, `db.table`, `db.table.column`); masks and truncation apply to the
event value (never the key, which must stay unique). Everything is compiled once per
table schema version into a `RowShaper`, so per-event work is a loop over prepared
converters.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable, Collection
from dataclasses import dataclass, field
from functools import lru_cache
from operator import itemgetter
from typing import TYPE_CHECKING, Any, ClassVar

import orjson

from cdc_core.config.connector_config import ConnectorConfig
from cdc_core.config.properties import compile_regex_list, full_match_any
from cdc_core.errors import ConfigError
from cdc_core.events import connect_schema
from cdc_core.schema.model import TableId, TableSchema
from cdc_core.source import IDENTITY, ColumnMapping, TypeMapper

if TYPE_CHECKING:
    from cdc_core.snapshot.staged_form import StagedForm


class TableFilter:
    """Decides whether a table is captured (database and table include/exclude lists)."""

    def __init__(self, config: ConnectorConfig, system: Collection[str] | None = None) -> None:
        """`system`: the source's own databases, never captured (default: the connector's)."""
        if system is None:
            from cdc_core.connectors.registry import connector_of

            system = connector_of(config).system_databases
        self.system = frozenset(d.lower() for d in system)
        self.db_include = config.get("database.include.list")
        self.db_exclude = config.get("database.exclude.list")
        self.table_include = config.get("table.include.list")
        self.table_exclude = config.get("table.exclude.list")
        # each list by the name the connector file gives it (MongoDB's collection.include.list)
        self.names = {name: _named_as(config, name) for name in _LISTS}
        self.captures = lru_cache(maxsize=4096)(self._captures)

    def __getstate__(self) -> dict[str, Any]:
        """Picklable (the binlog decoder process gets one) without its cache."""
        return {k: v for k, v in self.__dict__.items() if k != "captures"}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self.captures = lru_cache(maxsize=4096)(self._captures)

    def _captures(self, table: TableId) -> bool:
        if table.database.lower() in self.system:
            return False
        if self.db_include and not full_match_any(self.db_include, table.database):
            return False
        if self.db_exclude and full_match_any(self.db_exclude, table.database):
            return False
        name = str(table)
        if self.table_include and not full_match_any(self.table_include, name):
            return False
        return not (self.table_exclude and full_match_any(self.table_exclude, name))

    def excluded_by(self, table: TableId) -> str:
        """Which filter leaves `table` out, for people ("" when it is captured)."""
        if table.database.lower() in self.system:
            return f"{table.database} is a system database, never captured"
        name = str(table)
        for prop, patterns, leaves_out in (
            ("database.include.list", self.db_include, lambda p: not full_match_any(p, table.database)),
            ("database.exclude.list", self.db_exclude, lambda p: full_match_any(p, table.database)),
            ("table.include.list", self.table_include, lambda p: not full_match_any(p, name)),
            ("table.exclude.list", self.table_exclude, lambda p: full_match_any(p, name)),
        ):
            if patterns and leaves_out(patterns):
                matched = "not matched by" if prop.endswith("include.list") else "matched by"
                return f"{matched} {self.names[prop]}"
        return ""

    def captures_database(self, database: str) -> bool:
        if self.db_include and not full_match_any(self.db_include, database):
            return False
        return not (self.db_exclude and full_match_any(self.db_exclude, database))


_LISTS = ("database.include.list", "database.exclude.list", "table.include.list", "table.exclude.list")


def _named_as(config: ConnectorConfig, name: str) -> str:
    """The name a property was set under: its alias when the file used one."""
    for prop in config.properties:
        if prop.alias_of == name and config.values.get(prop.name) is not None:
            return prop.name
    return name


@dataclass(frozen=True)
class Truncate:
    """`column.truncate.to.N.chars`: a text value cut to its first N characters (code
    points). Only text columns (`ColumnMapping.text`), as in Debezium."""

    width: int
    changes_type_to_string: ClassVar[bool] = False

    def applies_to(self, mapping: ColumnMapping) -> bool:
        return mapping.text

    def apply(self, value: Any) -> Any:
        return value[: self.width] if isinstance(value, str) else value


@dataclass(frozen=True)
class Mask:
    """`column.mask.with.N.chars`: any value (of any type) replaced by N `*`."""

    chars: int
    changes_type_to_string: ClassVar[bool] = True

    def applies_to(self, mapping: ColumnMapping) -> bool:
        return True

    def apply(self, value: Any) -> Any:
        return "*" * self.chars


@dataclass(frozen=True)
class Hash:
    """`column.mask.hash.ALG.with.salt.SALT`: the hex digest of the salt followed by the
    value's event form (a string as is, anything else as its JSON text)."""

    algorithm: str  # hashlib's name: sha256, md5, blake2b, ...
    salt: str = field(repr=False)  # kept out of logs
    changes_type_to_string: ClassVar[bool] = True

    @classmethod
    def named(cls, alg: str, salt: str) -> Hash:
        """The rule for the ALG of a property name (`SHA-256`, `MD5`, ...)."""
        name = alg.replace("-", "").lower()
        if name not in hashlib.algorithms_available:
            raise ConfigError(f"column.mask.hash.{alg}.with.salt.{salt}", f"unknown hash algorithm {alg}")
        return cls(name, salt)

    def applies_to(self, mapping: ColumnMapping) -> bool:
        return True

    def apply(self, value: Any) -> Any:
        text = value if isinstance(value, str) else orjson.dumps(value).decode()
        return hashlib.new(self.algorithm, self.salt.encode() + text.encode()).hexdigest()


ValueRule = Truncate | Mask | Hash


class ColumnRules:
    """Column include/exclude lists, masks, hashes and truncation from the config.

    The one definition of these rules: the streamer shapes events with them (`RowShaper`)
    and the snapshot chunk readers shape staged rows with them
    (`cdc_core.snapshot.staged_form`, and `spark_jobs/staged_rules.py` for Spark)."""

    def __init__(self, config: ConnectorConfig) -> None:
        self.include = config.get("column.include.list")
        self.exclude = config.get("column.exclude.list")
        # In the order they apply to a value: truncation, masks, hashes.
        self.rules: list[tuple[list[re.Pattern[str]], ValueRule]] = []
        for (n,), patterns in config.family("column.truncate.to.N.chars"):
            self.rules.append((patterns, Truncate(int(n))))
        for (n,), patterns in config.family("column.mask.with.N.chars"):
            self.rules.append((patterns, Mask(int(n))))
        for (alg, salt), patterns in config.family("column.mask.hash.ALG.with.salt.SALT"):
            self.rules.append((patterns, Hash.named(alg, salt)))
        self.key_columns = _parse_key_columns(config.get("message.key.columns"))

    def keeps(self, table: TableId, column: str) -> bool:
        name = f"{table}.{column}"
        if self.include and not full_match_any(self.include, name):
            return False
        return not (self.exclude and full_match_any(self.exclude, name))

    def value_rules(
        self, table: TableId, column: str, mapping: ColumnMapping | None = None
    ) -> list[ValueRule]:
        """The rules matching a column, in the order they apply to its event value; with
        its `mapping`, only those that apply to its type."""
        name = f"{table}.{column}"
        return [
            rule
            for patterns, rule in self.rules
            if full_match_any(patterns, name) and (mapping is None or rule.applies_to(mapping))
        ]

    def key_for(self, schema: TableSchema) -> tuple[str, ...]:
        """`message.key.columns` for this table if it names it, else the primary key."""
        for pattern, columns in self.key_columns:
            if pattern.fullmatch(str(schema.id)):
                missing = [c for c in columns if schema.column(c) is None]
                if missing:
                    raise ConfigError("message.key.columns", f"table {schema.id} has no column(s) {missing}")
                return tuple(schema.column(c).name for c in columns)  # type: ignore[union-attr]
        return schema.primary_key


def configured_key(spec: str | None, table: str) -> tuple[str, ...]:
    """The columns `message.key.columns` (`spec`) names for `table` (`db.table`), if any:
    what the merge keys a table's keyless events by, those written before it was set too."""
    return next(
        (tuple(columns) for pattern, columns in _parse_key_columns(spec) if pattern.fullmatch(table)), ()
    )


def _parse_key_columns(spec: str | None) -> list[tuple[re.Pattern[str], list[str]]]:
    if not spec:
        return []
    out = []
    for part in filter(None, (p.strip() for p in spec.split(";"))):
        table, _, cols = part.partition(":")
        (pattern,) = compile_regex_list("message.key.columns", [table.strip()])
        out.append((pattern, [c.strip() for c in cols.split(",") if c.strip()]))
    return out


class RowShaper:
    """Everything needed to turn one table's positional row values into event dicts.

    Built once per table schema version: kept columns, their converters (with masks),
    the key columns, and the serialised key/value Connect schemas. With `staged`, the
    rows it is given are in that staged form (a Spark-staged snapshot window): positions
    are the staged columns', and columns staged with their rules applied are taken as they
    are, so the events are those the table's own rows would give.
    """

    def __init__(
        self,
        schema: TableSchema,
        topic: str,
        rules: ColumnRules,
        types: TypeMapper,
        staged: StagedForm | None = None,
    ) -> None:
        self.schema = schema
        self.topic = topic
        self.key_names = rules.key_for(schema)
        fields: list[dict[str, Any]] = []
        plan: list[tuple[str, int, Callable[[Any], Any]]] = []
        for position, column in enumerate(schema.columns):
            if not rules.keeps(schema.id, column.name) and column.name not in self.key_names:
                continue
            mapping = types.map_column(column)
            convert = mapping.convert
            field_schema = mapping.schema
            for rule in rules.value_rules(schema.id, column.name, mapping):
                convert = _chain(convert, rule.apply)
                if rule.changes_type_to_string:
                    field_schema = connect_schema.field("string", column.name, column.nullable)
            if staged is not None:
                position = staged.position(column.name)
                if column.name in staged.shaped:
                    convert = IDENTITY
            plan.append((column.name, position, convert))
            fields.append(field_schema)
        key_plan = []
        key_fields = []
        for name in self.key_names:
            position = schema.position(name)
            assert position is not None
            mapping = types.map_column(schema.columns[position], optional=False)
            staged_at = position if staged is None else staged.position(name)
            key_plan.append((schema.columns[position].name, staged_at, mapping.convert))
            key_fields.append(mapping.schema)
        self.plan = plan
        self.key_plan = key_plan
        self.row_schema = connect_schema.row_schema(topic, fields)
        self.key_schema = connect_schema.key_schema(topic, key_fields) if key_plan else None
        self.row = _row_builder(plan)
        self._key = _row_builder(key_plan)
        self._key_positions = [pos for _, pos, _ in key_plan]

    def key(self, values: tuple[Any, ...]) -> dict[str, Any] | None:
        return self._key(values) if self.key_plan else None

    def envelope_schema(self, source: dict[str, Any], ordered: bool) -> dict[str, Any]:
        return connect_schema.envelope_schema(self.topic, self.row_schema, source, ordered)

    def payload(self, event: Any) -> dict[str, Any]:
        return event.payload()

    def key_values(self, values: tuple[Any, ...]) -> tuple[Any, ...]:
        return tuple(values[pos] for pos in self._key_positions)


def _row_builder(
    plan: list[tuple[str, int, Callable[[Any], Any]]],
) -> Callable[[tuple[Any, ...] | None], dict[str, Any] | None]:
    """A function from positional values to the event's row dict. Columns whose values
    are already in event form are picked in C (itemgetter + zip); only the rest are
    converted in Python — this runs for every row the streamer emits."""
    names = [name for name, _, _ in plan]
    positions = [pos for _, pos, _ in plan]
    converted = [(i, convert) for i, (_, _, convert) in enumerate(plan) if convert is not IDENTITY]
    if not positions:
        return lambda values: None if values is None else {}
    getter = itemgetter(*positions)
    single = len(positions) == 1

    def build(values: tuple[Any, ...] | None) -> dict[str, Any] | None:
        if values is None:
            return None
        picked = [getter(values)] if single else list(getter(values))
        for i, convert in converted:
            picked[i] = convert(picked[i])
        return dict(zip(names, picked, strict=True))

    return build


def _chain(first: Callable[[Any], Any], second: Callable[[Any], Any]) -> Callable[[Any], Any]:
    return lambda v: None if v is None else second(first(v))
