"""Table schemas as immutable values.

The streamer decodes every change with the schema the table had when the change was
written (the schema timeline), so schemas must be cheap to copy, compare and serialise:
frozen dataclasses with a JSON form. The fields follow what Debezium's relational model
keeps (name, type, length/scale, optionality, charset, enum members, default), which is
what the event schemas and type mapping need.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields, replace
from typing import Any


@dataclass(frozen=True, order=True)
class TableId:
    """A captured table, in its source's terms: `database.table` (MySQL, MongoDB's
    `database.collection`, Vitess's `keyspace.table`) or `database.schema.table` (Oracle).
    Its string form is how signals' data-collections and filters name it."""

    database: str
    table: str
    schema: str | None = None

    def __str__(self) -> str:
        if self.schema is None:
            return f"{self.database}.{self.table}"
        return f"{self.database}.{self.schema}.{self.table}"

    def topic_suffix(self) -> str:
        """What follows `<topic.prefix>.` in the table's topic, as Debezium names it: the
        schema and the table where there are schemas (`<prefix>.<schema>.<table>`), the
        database and the table otherwise."""
        return f"{self.schema if self.schema is not None else self.database}.{self.table}"

    @classmethod
    def parse(cls, text: str, parts: int = 2) -> TableId:
        """`database.table`, or with `parts=3` `database.schema.table` (the table's own
        name may hold dots: it is everything after the leading parts)."""
        pieces = text.split(".", parts - 1)
        if len(pieces) != parts or not all(pieces):
            form = "database.table" if parts == 2 else "database.schema.table"
            raise ValueError(f"table id {text!r} is not of the form {form}")
        if parts == 2:
            return cls(pieces[0], pieces[1])
        return cls(pieces[0], pieces[2], pieces[1])


@dataclass(frozen=True)
class Column:
    """One column. `type_name` is the upper-case base type as written in DDL (`INT`,
    `VARCHAR`, `DECIMAL`, `DATETIME`, `ENUM`, ...), without length or attributes.

    `length` is the character/byte length (CHAR, VARCHAR, BINARY, VARBINARY), the bit
    width (BIT), the precision (DECIMAL) or the fractional-second digits (TIME, DATETIME,
    TIMESTAMP); `scale` is the DECIMAL scale. Integer display widths are not kept.
    """

    name: str
    type_name: str
    length: int | None = None
    scale: int | None = None
    unsigned: bool = False
    nullable: bool = True
    charset: str | None = None
    collation: str | None = None
    enum_values: tuple[str, ...] = ()
    default: str | None = None
    has_default: bool = False
    auto_increment: bool = False
    generated: bool = False
    comment: str | None = None
    # The DEFAULT is an expression (`CURRENT_TIMESTAMP`, `uuid()`, `(a + 1)`), not a literal.
    default_expression: bool = False

    def to_json(self) -> dict[str, Any]:
        """Only the fields that differ from their defaults, so histories stay small."""
        data: dict[str, Any] = {"name": self.name, "type_name": self.type_name}
        for f in fields(self)[2:]:
            value = getattr(self, f.name)
            if value != f.default:
                data[f.name] = list(value) if isinstance(value, tuple) else value
        return data

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Column:
        return cls(**{**data, "enum_values": tuple(data.get("enum_values", ()))})


@dataclass(frozen=True)
class TableSchema:
    """A table's columns in ordinal order, its primary key and its default charset."""

    id: TableId
    columns: tuple[Column, ...]
    primary_key: tuple[str, ...] = ()
    charset: str | None = None
    collation: str | None = None
    comment: str | None = None
    # A document collection (MongoDB): its rows are documents, fields not fixed by columns.
    documents: bool = False
    _index: dict[str, int] = field(default_factory=dict, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        index = {c.name.lower(): i for i, c in enumerate(self.columns)}
        if len(index) != len(self.columns):
            raise ValueError(f"table {self.id} has duplicate column names")
        object.__setattr__(self, "_index", index)

    @property
    def column_names(self) -> tuple[str, ...]:
        return tuple(c.name for c in self.columns)

    def column(self, name: str) -> Column | None:
        """Column by name, case-insensitively (MySQL column names are)."""
        i = self._index.get(name.lower())
        return None if i is None else self.columns[i]

    def position(self, name: str) -> int | None:
        return self._index.get(name.lower())

    def with_columns(
        self, columns: tuple[Column, ...], primary_key: tuple[str, ...] | None = None
    ) -> TableSchema:
        return replace(
            self, columns=columns, primary_key=self.primary_key if primary_key is None else primary_key
        )

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {
            "database": self.id.database,
            **({"schema": self.id.schema} if self.id.schema is not None else {}),
            "table": self.id.table,
            "columns": [c.to_json() for c in self.columns],
            "primary_key": list(self.primary_key),
        }
        for key in ("charset", "collation", "comment"):
            if getattr(self, key) is not None:
                data[key] = getattr(self, key)
        if self.documents:
            data["documents"] = True
        return data

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> TableSchema:
        return cls(
            id=TableId(data["database"], data["table"], data.get("schema")),
            columns=tuple(Column.from_json(c) for c in data["columns"]),
            primary_key=tuple(data.get("primary_key", ())),
            charset=data.get("charset"),
            collation=data.get("collation"),
            comment=data.get("comment"),
            documents=bool(data.get("documents", False)),
        )
