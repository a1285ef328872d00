"""MySQL/MariaDB DDL → changes to the schema timeline.

The binlog carries DDL as statement text (QUERY events); to decode later row events with
the right columns, the streamer applies each statement to its map of table schemas. This
is a hand-written tokenizer and recursive-descent parser for the DDL that changes tables
(CREATE/ALTER/DROP/RENAME/TRUNCATE TABLE, databases, indexes). Statements that cannot
change a table (GRANT, SET, views, routines, DML in statement form, ...) are recognised
and ignored. Anything else that starts like table DDL but cannot be parsed raises
`UnparseableDdlError` — the caller stops or, if configured, skips with a warning. It
never guesses.

Normalisation, so that a schema built from DDL text equals one read back from
`SHOW CREATE TABLE`: integer display widths are dropped (BOOLEAN is TINYINT), `INTEGER`
is `INT`, `DEC`/`NUMERIC`/`FIXED` are `DECIMAL` (default 10,0), `REAL` and
`DOUBLE PRECISION` are `DOUBLE`, a fractional-seconds precision of 0 is no precision,
`utf8` is `utf8mb3`, and MariaDB's rendering of JSON (`longtext ... CHECK (json_valid(c))`)
is `JSON`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace

from cdc_core.connectors.mysql.ddl_alter import alter_statement
from cdc_core.connectors.mysql.ddl_tables import DdlOutcome, TableView, create_table_body, ignored_object
from cdc_core.connectors.mysql.ddl_tokens import Parser, UnknownTableError, UnparseableDdlError, shorten
from cdc_core.schema.model import TableId, TableSchema

# The parser's public face; its parts: ddl_tokens (tokenizer, cursor, errors), ddl_columns
# (column definitions), ddl_tables (CREATE TABLE bodies, the changed table map), ddl_alter.
__all__ = ["DdlOutcome", "UnknownTableError", "UnparseableDdlError", "apply_ddl", "parse_create_table"]

_IGNORED_STATEMENTS = {
    "BEGIN",
    "COMMIT",
    "ROLLBACK",
    "SAVEPOINT",
    "RELEASE",
    "XA",
    "SET",
    "FLUSH",
    "GRANT",
    "REVOKE",
    "INSERT",
    "UPDATE",
    "DELETE",
    "REPLACE",
    "CALL",
    "DO",
    "USE",
    "LOCK",
    "UNLOCK",
    "SHOW",
    "ANALYZE",
    "OPTIMIZE",
    "REPAIR",
    "CHECK",
    "CHECKSUM",
    "LOAD",
    "HANDLER",
    "PURGE",
    "RESET",
    "INSTALL",
    "UNINSTALL",
    "SELECT",
    "WITH",
    "KILL",
    "EXECUTE",
    "PREPARE",
    "DEALLOCATE",
    "START",
    "STOP",
    "CHANGE",
    "SIGNAL",
}


def apply_ddl(
    statement: str, default_database: str | None, tables: Mapping[TableId, TableSchema]
) -> DdlOutcome:
    """Apply one statement to `tables` (never mutated); see the module docstring."""
    p = Parser(statement, default_database)
    view = TableView(tables)
    first = p.peek()
    if first is None or (first.kind == "sym" and first.text == ";"):
        return DdlOutcome("ignored", (), tables)
    if first.kind != "word":
        raise p.error("not a statement")
    word = first.text.upper()
    if word == "CREATE":
        return _create(p, view)
    if word == "ALTER":
        return alter_statement(p, view)
    if word == "DROP":
        return _drop(p, view)
    if word == "RENAME":
        return _rename(p, view)
    if word == "TRUNCATE":
        p.next()
        p.accept_kw("TABLE")
        table = p.table_name()
        p.expect_end()
        return DdlOutcome("truncate_table", (table,), tables)
    if word in _IGNORED_STATEMENTS:
        return DdlOutcome("ignored", (), tables)
    raise p.error(f"unknown statement {first.text}")


def _create(p: Parser, view: TableView) -> DdlOutcome:
    p.next()
    p.accept_seq("OR", "REPLACE")  # the table it replaces: `DdlOutcome.replaced`
    temporary = p.accept_kw("TEMPORARY")
    if p.accept_kw("TABLE"):
        if temporary:
            p.skip_rest()
            return DdlOutcome("ignored", (), view.original)
        if_not_exists = p.accept_seq("IF", "NOT", "EXISTS")
        table = p.table_name()
        if _makes_sequence(p):
            p.skip_rest()
            return DdlOutcome("ignored", (), view.original)
        if if_not_exists and table in view.tables:
            p.skip_rest()
            return DdlOutcome("create_table", (table,), view.original)
        schema = create_table_body(p, table, view)
        # Without OR REPLACE the server accepted it only if the old table was gone already.
        replaced = (table,) if table in view.tables else ()
        view.put(schema)
        return DdlOutcome("create_table", (table,), view.result(), replaced=replaced)
    if p.accept_kw("DATABASE", "SCHEMA"):
        p.accept_seq("IF", "NOT", "EXISTS")
        name = p.ident()
        p.skip_rest()
        return DdlOutcome("create_database", (), view.original, (name,))
    p.accept_kw("UNIQUE", "FULLTEXT", "SPATIAL")
    if p.accept_kw("INDEX"):
        return _index_on(p, view, "create_index")
    if ignored_object(p):
        return DdlOutcome("ignored", (), view.original)
    raise p.error("unsupported CREATE statement")


def _index_on(p: Parser, view: TableView, kind: str) -> DdlOutcome:
    p.accept_seq("IF", "NOT", "EXISTS") or p.accept_seq("IF", "EXISTS")
    p.ident()
    while not p.accept_kw("ON"):
        p.next()
    table = p.table_name()
    p.skip_rest()
    return DdlOutcome(kind, (table,), view.original)


def _drop(p: Parser, view: TableView) -> DdlOutcome:
    p.next()
    temporary = p.accept_kw("TEMPORARY")
    if p.accept_kw("TABLE", "TABLES"):
        if_exists = p.accept_seq("IF", "EXISTS")
        names = [p.table_name()]
        while p.accept_sym(","):
            names.append(p.table_name())
        p.accept_kw("RESTRICT", "CASCADE")
        p.accept_kw("WAIT", "NOWAIT")
        if temporary:
            return DdlOutcome("ignored", (), view.original)
        for name in names:
            if name not in view.tables and not if_exists:
                pass  # the server dropped something the timeline never had: nothing to forget
            view.drop(name)
        return DdlOutcome("drop_table", tuple(names), view.result())
    if p.accept_kw("DATABASE", "SCHEMA"):
        p.accept_seq("IF", "EXISTS")
        name = p.ident()
        gone = [t for t in view.tables if t.database == name]
        for table in gone:
            view.drop(table)
        return DdlOutcome("drop_database", tuple(gone), view.result(), (name,))
    if p.accept_kw("INDEX"):
        return _index_on(p, view, "drop_index")
    if ignored_object(p):
        return DdlOutcome("ignored", (), view.original)
    raise p.error("unsupported DROP statement")


def _rename(p: Parser, view: TableView) -> DdlOutcome:
    p.next()
    if not p.accept_kw("TABLE", "TABLES"):
        if ignored_object(p):
            return DdlOutcome("ignored", (), view.original)
        raise p.error("unsupported RENAME statement")
    affected: list[TableId] = []
    while True:
        old = p.table_name()
        p.expect_kw("TO")
        new = p.table_name()
        if old in view.tables:  # (RENAME TABLE renames views and sequences too: not in the history)
            schema = view.get(old)
            view.drop(old)
            view.put(replace(schema, id=new))
            affected += [old, new]
        if not p.accept_sym(","):
            break
    p.expect_end()
    return DdlOutcome("rename_table", tuple(affected), view.result())


def _makes_sequence(p: Parser) -> bool:
    """Whether a CREATE TABLE has the table option SEQUENCE=1, MariaDB's other way of
    creating a sequence: its rows are the sequence's state (`server.SEQUENCE_COLUMNS`)."""
    at = p.i
    try:
        if p.is_sym("("):
            p.skip_parens()  # the element list: a column may be named `sequence`
        while (token := p.peek()) is not None and not (token.kind == "sym" and token.text == ";"):
            if p.is_sym("("):
                p.skip_parens()
                continue
            p.next()
            if token.is_kw("SEQUENCE"):
                p.accept_sym("=")
                value = p.peek()
                if value is not None and value.text in ("1", "'1'"):
                    return True
        return False
    finally:
        p.i = at


def parse_create_table(statement: str, default_database: str | None) -> TableSchema:
    """A table's schema from `CREATE TABLE` text (e.g. `SHOW CREATE TABLE` output)."""
    outcome = apply_ddl(statement, default_database, {})
    if outcome.kind != "create_table" or len(outcome.affected) != 1:
        raise UnparseableDdlError(f"not a CREATE TABLE statement: {shorten(statement)}")
    return outcome.tables[outcome.affected[0]]
