"""Table definitions in DDL: a CREATE TABLE body (columns, keys, options) and the view of
the table map a statement changes."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace

from cdc_core.connectors.mysql.ddl_columns import (
    KNOWN_TYPES,
    TYPE_ALIASES,
    charset_of_collation,
    norm_charset,
    parse_column,
)
from cdc_core.connectors.mysql.ddl_tokens import (
    Parser,
    Token,
    UnknownTableError,
    UnparseableDdlError,
    shorten,
)
from cdc_core.schema.model import Column, TableId, TableSchema


@dataclass(frozen=True)
class DdlOutcome:
    kind: str
    affected: tuple[TableId, ...]
    tables: Mapping[TableId, TableSchema]
    databases: tuple[str, ...] = ()
    # A partition operation that removes or moves rows with no row events (TRUNCATE, DROP,
    # EXCHANGE or CONVERT PARTITION): the binlog holds the statement alone.
    rows_below_binlog: str | None = None
    # Tables a CREATE TABLE made anew under a name that held one (MariaDB's CREATE OR
    # REPLACE): their rows are gone, though the name stays.
    replaced: tuple[TableId, ...] = ()


_IGNORED_OBJECTS = {
    "VIEW",
    "PROCEDURE",
    "FUNCTION",
    "TRIGGER",
    "EVENT",
    "USER",
    "ROLE",
    "SEQUENCE",
    "SERVER",
    "LOGFILE",
    "TABLESPACE",
    "PACKAGE",
    "SYNONYM",
    "INSTANCE",
    "RESOURCE",
    "SPATIAL REFERENCE SYSTEM",
}


class TableView:
    """A copy-on-write view of the table map for one statement."""

    def __init__(self, tables: Mapping[TableId, TableSchema]) -> None:
        self.original = tables
        self.tables = dict(tables)
        self.changed = False

    def get(self, table: TableId) -> TableSchema:
        schema = self.tables.get(table)
        if schema is None:
            raise UnknownTableError(f"table {table} is not in the schema history")
        return schema

    def put(self, schema: TableSchema) -> None:
        self.tables[schema.id] = schema
        self.changed = True

    def drop(self, table: TableId) -> None:
        if self.tables.pop(table, None) is not None:
            self.changed = True

    def result(self) -> Mapping[TableId, TableSchema]:
        return self.tables if self.changed else self.original


def ignored_object(p: Parser) -> bool:
    """CREATE/ALTER/DROP of views, routines, users, ...: recognised in the first words."""
    for k in range(12):
        tok = p.peek(k)
        if tok is None:
            return False
        if tok.is_kw(*_IGNORED_OBJECTS):
            return True
        if tok.is_kw("TABLE", "DATABASE", "SCHEMA", "INDEX"):
            return False
    return False


def create_table_body(p: Parser, table: TableId, view: TableView) -> TableSchema:
    if p.accept_kw("LIKE") or (p.is_sym("(") and p.peek(1) is not None and p.peek(1).is_kw("LIKE")):
        paren = p.accept_sym("(")
        p.accept_kw("LIKE")
        source = p.table_name()
        if paren:
            p.expect_sym(")")
        p.expect_end()
        original = view.get(source)
        return replace(original, id=table)
    if not p.is_sym("("):
        raise UnparseableDdlError(
            f"CREATE TABLE ... SELECT without column definitions is not supported (the result's types are "
            f"only known to the server): {shorten(p.sql)}"
        )
    p.expect_sym("(")
    elements_start = p.i
    # Table options come after the element list but set the default charset of its
    # columns: read them first.
    p.i = elements_start - 1
    p.skip_parens()
    charset, collation, comment = _table_options(p)
    after_options = p.i
    p.i = elements_start
    columns: list[Column] = []
    primary: list[str] = []
    while True:
        if _table_element(p, primary):
            pass
        else:
            definition = parse_column(p, charset, collation)
            columns.append(definition.column)
            if definition.primary_key:
                primary.append(definition.column.name)
        if p.accept_sym(")"):
            break
        p.expect_sym(",")
    p.i = after_options
    if p.accept_kw("PARTITION"):
        p.skip_rest()
    if p.peek() is not None and p.peek().is_kw("IGNORE", "REPLACE", "AS", "SELECT"):
        raise UnparseableDdlError(
            f"CREATE TABLE ... SELECT is not supported (the columns the SELECT adds are only known to the "
            f"server; with binlog_format=ROW the server logs the rewritten CREATE TABLE instead): {shorten(p.sql)}"
        )
    p.expect_end()
    return with_primary_key(TableSchema(table, tuple(columns), (), charset, collation, comment), primary)


def with_primary_key(schema: TableSchema, key: list[str]) -> TableSchema:
    names = []
    columns = list(schema.columns)
    for name in key:
        position = schema.position(name)
        if position is None:
            raise UnknownTableError(f"primary key column {name} is not a column of {schema.id}")
        columns[position] = replace(columns[position], nullable=False)
        names.append(columns[position].name)
    return replace(schema, columns=tuple(columns), primary_key=tuple(names))


def key_columns(p: Parser) -> list[str]:
    p.expect_sym("(")
    names = []
    while True:
        names.append(p.ident())
        if p.is_sym("("):
            p.skip_parens()  # prefix length
        p.accept_kw("ASC", "DESC")
        if p.accept_sym(")"):
            return names
        p.expect_sym(",")


def _table_element(p: Parser, primary: list[str]) -> bool:
    """Constraints and indexes inside CREATE TABLE (...); True if one was consumed."""
    tok = p.peek()
    if tok is None or tok.kind != "word":
        return False
    tok = skip_constraint_name(p)
    if tok.is_kw("PRIMARY") and p.peek(1) is not None and p.peek(1).is_kw("KEY"):
        p.i += 2
        if p.accept_kw("USING"):
            p.next()
        primary[:] = key_columns(p)
        p.skip_to_element_end()
        return True
    if tok.is_kw("KEY", "INDEX", "UNIQUE", "FULLTEXT", "SPATIAL", "FOREIGN", "CHECK", "PERIOD"):
        # A column may be named like these only when quoted, so an unquoted one is an element.
        if (
            tok.is_kw("CHECK")
            or tok.is_kw("PERIOD")
            or p.peek(1) is None
            or not (p.peek(1).kind == "word" and _looks_like_type(p.peek(1)))
        ):
            p.next()
            p.skip_to_element_end()
            return True
    return False


def skip_constraint_name(p: Parser) -> Token:
    """Consume `CONSTRAINT [name]` if present; return the token that follows."""
    if p.accept_kw("CONSTRAINT"):
        nxt = p.peek()
        if nxt is not None and not nxt.is_kw("PRIMARY", "UNIQUE", "FOREIGN", "CHECK"):
            p.ident()
    tok = p.peek()
    if tok is None:
        raise p.error("incomplete constraint")
    return tok


def _looks_like_type(tok: Token) -> bool:
    return tok.text.upper() in KNOWN_TYPES or tok.text.upper() in TYPE_ALIASES


def _table_options(p: Parser) -> tuple[str | None, str | None, str | None]:
    charset = collation = comment = None
    while True:
        tok = p.peek()
        if tok is None or (tok.kind == "sym" and tok.text == ";"):
            break
        if tok.kind == "sym" and tok.text == ",":
            p.next()
            continue
        if tok.is_kw("PARTITION") or tok.is_kw("AS", "SELECT", "IGNORE", "REPLACE", "WITH"):
            if tok.is_kw("WITH") and p.peek(1) is not None and p.peek(1).is_kw("SYSTEM"):
                p.i += 3
                continue
            break
        option = charset_option(p)
        if option is not None:
            if option[0] == "charset":
                charset = option[1]
            else:
                collation = option[1]
            continue
        p.accept_kw("DEFAULT")
        if p.accept_kw("COMMENT"):
            p.accept_sym("=")
            comment = p.next().text
        else:
            name = p.next()
            if name.kind != "word":
                raise p.error("expected a table option", name)
            p.accept_sym("=")
            if p.is_sym("("):
                p.skip_parens()
            elif p.peek() is not None and not (p.peek().kind == "sym" and p.peek().text in ",;"):
                p.next()
    if collation and not charset:
        charset = charset_of_collation(collation)
    return charset, collation, comment


def charset_option(p: Parser) -> tuple[str, str] | None:
    """One `[DEFAULT] CHARACTER SET|CHARSET|COLLATE [=] name` option, or None (nothing consumed)."""
    start = p.i
    p.accept_kw("DEFAULT")
    if p.accept_seq("CHARACTER", "SET") or p.accept_kw("CHARSET"):
        p.accept_sym("=")
        return "charset", norm_charset(p.ident()) or ""
    if p.accept_kw("COLLATE"):
        p.accept_sym("=")
        return "collation", p.ident().lower()
    p.i = start
    return None
