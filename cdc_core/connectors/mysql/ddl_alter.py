"""ALTER TABLE: each specification (columns added, changed, renamed or dropped; keys;
charset options) applied to the table's schema."""

from __future__ import annotations

from dataclasses import replace

from cdc_core.connectors.mysql.ddl_columns import (
    CHARSET_TYPES,
    ColumnDef,
    default_value,
    norm_charset,
    parse_column,
    position_after_column,
)
from cdc_core.connectors.mysql.ddl_tables import (
    DdlOutcome,
    TableView,
    charset_option,
    ignored_object,
    key_columns,
    skip_constraint_name,
    with_primary_key,
)
from cdc_core.connectors.mysql.ddl_tokens import Parser, UnknownTableError
from cdc_core.schema.model import Column, TableId, TableSchema


def alter_statement(p: Parser, view: TableView) -> DdlOutcome:
    p.next()
    p.accept_kw("ONLINE")
    p.accept_kw("IGNORE")
    if p.accept_kw("DATABASE", "SCHEMA"):
        name = p.peek()
        p.skip_rest()
        database = name.text if name is not None and name.kind in ("word", "qident") else (p.default_db or "")
        return DdlOutcome("alter_database", (), view.original, (database,))
    if not p.accept_kw("TABLE"):
        if ignored_object(p):
            return DdlOutcome("ignored", (), view.original)
        raise p.error("unsupported ALTER statement")
    p.accept_seq("IF", "EXISTS")
    table = p.table_name()
    schema = view.get(table)
    affected = [table]
    moved = None
    while p.peek() is not None and not (p.is_sym(";")):
        moved = _partition_rows(p, view, schema, affected)
        if moved is not None:  # (it reads the rest: ALGORITHM=, LOCK= may come before it)
            break
        schema = _alter_spec(p, schema, affected)
        if not p.accept_sym(","):
            break
    p.expect_end()
    if schema.id != table:
        view.drop(table)
    view.put(schema)
    return DdlOutcome("alter_table", tuple(affected), view.result(), rows_below_binlog=moved)


def _partition_rows(p: Parser, view: TableView, schema: TableSchema, affected: list[TableId]) -> str | None:
    """A partition operation that removes or moves rows without row events (the last
    specification of its statement): which one, the other table it involves added to
    `affected`, and a table it makes or takes in the history. None (nothing consumed) for
    any other specification."""
    first, second = p.peek(), p.peek(1)
    if first is None or second is None:
        return None
    if first.is_kw("TRUNCATE", "DROP") and second.is_kw("PARTITION"):
        p.skip_rest()
        return f"{first.text.upper()} PARTITION"
    if first.is_kw("EXCHANGE") and second.is_kw("PARTITION"):
        p.next(), p.next(), p.ident()
        p.expect_kw("WITH")
        p.expect_kw("TABLE")
        affected.append(p.table_name())
        p.skip_rest()
        return "EXCHANGE PARTITION"
    if first.is_kw("CONVERT") and second.is_kw("PARTITION"):
        # MariaDB 10.7+: the partition's rows become a table
        p.next(), p.next(), p.ident()
        p.expect_kw("TO")
        p.expect_kw("TABLE")
        made = p.table_name()
        view.put(replace(schema, id=made))
        affected.append(made)
        p.skip_rest()
        return "CONVERT PARTITION"
    if first.is_kw("CONVERT") and second.is_kw("TABLE"):  # a table's rows become a partition
        p.next(), p.next()
        taken = p.table_name()
        view.drop(taken)
        affected.append(taken)
        p.skip_rest()
        return "CONVERT TABLE ... TO PARTITION"
    return None


def _alter_spec(p: Parser, schema: TableSchema, affected: list[TableId]) -> TableSchema:
    if p.accept_kw("ADD"):
        return _alter_add(p, schema)
    if p.accept_kw("DROP"):
        return _alter_drop(p, schema)
    if p.accept_kw("MODIFY"):
        p.accept_kw("COLUMN")
        if_exists = p.accept_seq("IF", "EXISTS")
        name_tok = p.peek()
        if if_exists and name_tok is not None and schema.column(name_tok.text) is None:
            p.skip_to_element_end()
            return schema
        definition = parse_column(p, schema.charset, schema.collation)
        return _replace_column(p, schema, definition.column.name, definition)
    if p.accept_kw("CHANGE"):
        p.accept_kw("COLUMN")
        if_exists = p.accept_seq("IF", "EXISTS")
        old = p.ident()
        if if_exists and schema.column(old) is None:
            p.skip_to_element_end()
            return schema
        definition = parse_column(p, schema.charset, schema.collation)
        return _replace_column(p, schema, old, definition)
    if p.accept_kw("RENAME"):
        if p.accept_kw("COLUMN"):
            old = p.ident()
            p.expect_kw("TO")
            new = p.ident()
            column = _require_column(schema, old)
            return _rename_column(schema, column.name, replace(column, name=new))
        if p.accept_kw("INDEX", "KEY"):
            p.ident()
            p.expect_kw("TO")
            p.ident()
            return schema
        p.accept_kw("TO", "AS")
        new_id = p.table_name()
        affected.append(new_id)
        return replace(schema, id=new_id)
    if p.accept_kw("ALTER"):
        if p.accept_kw("INDEX", "CHECK", "CONSTRAINT"):
            p.skip_to_element_end()
            return schema
        p.accept_kw("COLUMN")
        p.accept_seq("IF", "EXISTS")
        name = p.ident()
        column = _require_column(schema, name)
        if p.accept_seq("SET", "DEFAULT"):
            value, expression = default_value(p)
            changed = replace(column, default=value, has_default=True, default_expression=expression)
            return _rename_column(schema, column.name, changed)
        if p.accept_seq("DROP", "DEFAULT"):
            changed = replace(column, default=None, has_default=False, default_expression=False)
            return _rename_column(schema, column.name, changed)
        if p.accept_kw("SET"):
            p.expect_kw("VISIBLE", "INVISIBLE")
            return schema
        raise p.error("unsupported ALTER COLUMN")
    if p.accept_seq("CONVERT", "TO"):
        if not (p.accept_seq("CHARACTER", "SET") or p.accept_kw("CHARSET")):
            raise p.error("expected CHARACTER SET")
        charset = norm_charset(p.ident())
        collation = p.ident().lower() if p.accept_kw("COLLATE") else None
        columns = tuple(
            replace(c, charset=charset, collation=collation) if c.type_name in CHARSET_TYPES else c
            for c in schema.columns
        )
        return replace(schema, columns=columns, charset=charset, collation=collation)
    tok = p.peek()
    if tok is not None and tok.is_kw("DEFAULT", "CHARACTER", "CHARSET", "COLLATE"):
        while (option := charset_option(p)) is not None:
            schema = replace(schema, **{option[0]: option[1]})
        return schema
    if p.accept_kw("ENABLE", "DISABLE"):
        p.expect_kw("KEYS")
        return schema
    if p.accept_kw("DISCARD", "IMPORT"):
        p.skip_to_element_end()
        return schema
    if tok is not None and tok.is_kw(
        "COALESCE",
        "REORGANIZE",
        "ANALYZE",
        "CHECK",
        "OPTIMIZE",
        "REBUILD",
        "REPAIR",
        "REMOVE",
        "PARTITION",
    ):
        p.skip_rest()
        return schema
    if p.accept_kw("FORCE"):
        return schema
    if p.accept_seq("ORDER", "BY"):
        p.skip_to_element_end()
        return schema
    if p.accept_kw("WITH", "WITHOUT"):
        p.expect_kw("VALIDATION", "SYSTEM")
        p.accept_kw("VERSIONING")
        return schema
    if tok is not None and tok.kind == "word" and p.peek(1) is not None:
        # ENGINE=..., ALGORITHM=..., LOCK=..., COMMENT=..., AUTO_INCREMENT=..., ROW_FORMAT=...
        if p.is_sym("=", 1) or tok.is_kw(
            "ENGINE",
            "ALGORITHM",
            "LOCK",
            "COMMENT",
            "AUTO_INCREMENT",
            "ROW_FORMAT",
            "KEY_BLOCK_SIZE",
            "STATS_PERSISTENT",
            "STATS_AUTO_RECALC",
            "STATS_SAMPLE_PAGES",
            "PAGE_COMPRESSED",
            "MAX_ROWS",
            "MIN_ROWS",
            "PACK_KEYS",
            "CHECKSUM",
            "DELAY_KEY_WRITE",
            "ENCRYPTED",
            "ENCRYPTION_KEY_ID",
        ):
            p.next()
            p.accept_sym("=")
            comment_tok = p.next()
            if tok.is_kw("COMMENT"):
                return replace(schema, comment=comment_tok.text)
            return schema
    raise p.error("unsupported ALTER TABLE clause")


def _alter_add(p: Parser, schema: TableSchema) -> TableSchema:
    tok = p.peek()
    if tok is None:
        raise p.error("incomplete ADD")
    tok = skip_constraint_name(p)
    if tok.is_kw("PRIMARY"):
        p.next()
        p.expect_kw("KEY")
        if p.accept_kw("USING"):
            p.next()
        key = key_columns(p)
        p.skip_to_element_end()
        return with_primary_key(schema, key)
    if tok is not None and (
        tok.is_kw("INDEX", "KEY", "UNIQUE", "FULLTEXT", "SPATIAL", "FOREIGN", "CHECK", "PERIOD")
        or (tok.is_kw("SYSTEM") and p.peek(1) is not None and p.peek(1).is_kw("VERSIONING"))
    ):
        p.skip_to_element_end()
        return schema
    if tok is not None and tok.is_kw("PARTITION"):
        p.skip_rest()
        return schema
    p.accept_kw("COLUMN")
    if_not_exists = p.accept_seq("IF", "NOT", "EXISTS")
    if p.accept_sym("("):
        while True:
            schema = _add_column(p, schema, if_not_exists, allow_position=False)
            if p.accept_sym(")"):
                return schema
            p.expect_sym(",")
    return _add_column(p, schema, if_not_exists, allow_position=True)


def _add_column(p: Parser, schema: TableSchema, if_not_exists: bool, allow_position: bool) -> TableSchema:
    name_tok = p.peek()
    if if_not_exists and name_tok is not None and schema.column(name_tok.text) is not None:
        p.skip_to_element_end()
        return schema
    definition = parse_column(p, schema.charset, schema.collation)
    where, anchor = position_after_column(p) if allow_position else ("last", None)
    if schema.column(definition.column.name) is not None:
        raise UnknownTableError(f"column {definition.column.name} already exists in {schema.id}")
    columns = list(schema.columns)
    columns.insert(_insert_index(schema, columns, where, anchor), definition.column)
    schema = replace(schema, columns=tuple(columns))
    if definition.primary_key:
        schema = with_primary_key(schema, [*schema.primary_key, definition.column.name])
    return schema


def _insert_index(schema: TableSchema, columns: list[Column], where: str, anchor: str | None) -> int:
    if where == "first":
        return 0
    if where == "after":
        names = [c.name.lower() for c in columns]
        if anchor is None or anchor.lower() not in names:
            raise UnknownTableError(f"column {anchor} (AFTER) is not a column of {schema.id}")
        return names.index(anchor.lower()) + 1
    return len(columns)


def _require_column(schema: TableSchema, name: str) -> Column:
    column = schema.column(name)
    if column is None:
        raise UnknownTableError(f"column {name} is not a column of {schema.id}")
    return column


def _rename_column(schema: TableSchema, old: str, new: Column) -> TableSchema:
    columns = tuple(new if c.name.lower() == old.lower() else c for c in schema.columns)
    key = tuple(new.name if k.lower() == old.lower() else k for k in schema.primary_key)
    return replace(schema, columns=columns, primary_key=key)


def _replace_column(p: Parser, schema: TableSchema, old: str, definition: ColumnDef) -> TableSchema:
    _require_column(schema, old)
    where, anchor = position_after_column(p)
    new = definition.column
    in_key = any(k.lower() == old.lower() for k in schema.primary_key)
    if in_key:
        new = replace(new, nullable=False)
    renamed = _rename_column(schema, old, new)
    if where != "last":
        columns = [c for c in renamed.columns if c.name.lower() != new.name.lower()]
        columns.insert(_insert_index(renamed, columns, where, anchor), new)
        renamed = replace(renamed, columns=tuple(columns))
    if definition.primary_key and not in_key:
        renamed = with_primary_key(renamed, [*renamed.primary_key, new.name])
    return renamed


def _alter_drop(p: Parser, schema: TableSchema) -> TableSchema:
    if p.accept_seq("PRIMARY", "KEY"):
        return replace(schema, primary_key=())
    tok = p.peek()
    if tok is not None and tok.is_kw("INDEX", "KEY", "FOREIGN", "CONSTRAINT", "CHECK", "PERIOD", "SYSTEM"):
        p.skip_to_element_end()
        return schema
    p.accept_kw("COLUMN")
    if_exists = p.accept_seq("IF", "EXISTS")
    name = p.ident()
    if schema.column(name) is None:
        if if_exists:
            return schema
        raise UnknownTableError(f"column {name} is not a column of {schema.id}")
    p.accept_kw("RESTRICT", "CASCADE")
    columns = tuple(c for c in schema.columns if c.name.lower() != name.lower())
    key = tuple(k for k in schema.primary_key if k.lower() != name.lower())
    return replace(schema, columns=columns, primary_key=key)
