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

import re
from collections.abc import Mapping
from dataclasses import dataclass, replace

from cdc_core.connectors.mysql.spatial import GEOMETRY_TYPES
from cdc_core.connectors.mysql.types import BINARY_TYPES, CHAR_TYPES, INT_TYPES
from cdc_core.schema.model import Column, TableId, TableSchema


class UnparseableDdlError(Exception):
    """The statement looks like table DDL but cannot be parsed."""


class UnknownTableError(UnparseableDdlError):
    """The statement changes a table or column the timeline does not know."""


@dataclass(frozen=True)
class DdlOutcome:
    kind: str
    affected: tuple[TableId, ...]
    tables: Mapping[TableId, TableSchema]
    databases: tuple[str, ...] = ()


# ----------------------------------------------------------------------------- tokens

_WORD = re.compile(r"[A-Za-z0-9_$\u0080-\uffff]+")
_NUMBER = re.compile(r"(?:\d+\.?\d*(?:[eE][+-]?\d+)?|\.\d+(?:[eE][+-]?\d+)?)")


@dataclass(frozen=True)
class Token:
    kind: str  # word, qident, string, number, sym, hexbits
    text: str
    pos: int
    raw: str = ""

    def is_kw(self, *words: str) -> bool:
        return self.kind == "word" and self.text.upper() in words


def tokenize(sql: str) -> list[Token]:
    tokens: list[Token] = []
    i, n = 0, len(sql)
    in_exec = 0  # depth of /*! ... */ executable comments
    while i < n:
        ch = sql[i]
        if ch.isspace():
            i += 1
        elif sql.startswith("/*!", i) or sql.startswith("/*M!", i):
            i += 4 if sql[i + 2] == "M" else 3
            while i < n and sql[i].isdigit():
                i += 1
            in_exec += 1
        elif sql.startswith("*/", i) and in_exec:
            in_exec -= 1
            i += 2
        elif sql.startswith("/*", i):
            end = sql.find("*/", i + 2)
            i = n if end < 0 else end + 2
        elif ch == "#" or (sql.startswith("--", i) and (i + 2 >= n or sql[i + 2].isspace())):
            end = sql.find("\n", i)
            i = n if end < 0 else end + 1
        elif ch == "`":
            text, i = _quoted(sql, i, "`")
            tokens.append(Token("qident", text, i))
        elif ch in "'\"":
            start = i
            text, i = _quoted(sql, i, ch)
            tokens.append(Token("string", text, start, sql[start:i]))
        elif ch in "xXbB" and i + 1 < n and sql[i + 1] == "'":
            start = i
            text, i = _quoted(sql, i + 1, "'")
            tokens.append(Token("hexbits", text, start, sql[start:i]))
        elif ch.isdigit() or (ch == "." and i + 1 < n and sql[i + 1].isdigit()):
            m = _NUMBER.match(sql, i)
            assert m is not None
            word = _WORD.match(sql, i)
            if word and word.end() > m.end():  # identifiers may start with digits
                tokens.append(Token("word", word.group(), i))
                i = word.end()
            else:
                tokens.append(Token("number", m.group(), i))
                i = m.end()
        elif ch == "_" or ch.isalpha() or ch == "$" or ord(ch) > 127:
            m = _WORD.match(sql, i)
            assert m is not None
            word = m.group()
            # Charset introducers: _utf8mb4'text' is just the string.
            if word.startswith("_") and m.end() < n and sql[m.end()] == "'":
                start = i
                text, i = _quoted(sql, m.end(), "'")
                tokens.append(Token("string", text, start, sql[start:i]))
                continue
            tokens.append(Token("word", word, i))
            i = m.end()
        else:
            tokens.append(Token("sym", ch, i))
            i += 1
    return tokens


def _quoted(sql: str, i: int, quote: str) -> tuple[str, int]:
    out = []
    j = i + 1
    n = len(sql)
    while j < n:
        ch = sql[j]
        if ch == quote:
            if j + 1 < n and sql[j + 1] == quote:
                out.append(quote)
                j += 2
                continue
            return "".join(out), j + 1
        if ch == "\\" and quote != "`" and j + 1 < n:
            nxt = sql[j + 1]
            out.append({"n": "\n", "t": "\t", "r": "\r", "0": "\0", "Z": "\x1a", "b": "\b"}.get(nxt, nxt))
            j += 2
            continue
        out.append(ch)
        j += 1
    raise UnparseableDdlError(f"unterminated {quote}-quoted text starting at offset {i}")


# ----------------------------------------------------------------------------- parser


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
_TYPE_ALIASES = {
    "INTEGER": "INT",
    "INT1": "TINYINT",
    "INT2": "SMALLINT",
    "INT3": "MEDIUMINT",
    "INT4": "INT",
    "INT8": "BIGINT",
    "MIDDLEINT": "MEDIUMINT",
    "DEC": "DECIMAL",
    "NUMERIC": "DECIMAL",
    "FIXED": "DECIMAL",
    "REAL": "DOUBLE",
    "FLOAT4": "FLOAT",
    "FLOAT8": "DOUBLE",
    "CHARACTER": "CHAR",
    "NCHAR": "CHAR",
    "NVARCHAR": "VARCHAR",
}
_INT_TYPES = set(INT_TYPES)
_CHAR_TYPES = CHAR_TYPES | {"ENUM", "SET"}
_KNOWN_TYPES = (
    _INT_TYPES
    | _CHAR_TYPES
    | BINARY_TYPES
    | GEOMETRY_TYPES
    | {
        "DECIMAL",
        "FLOAT",
        "DOUBLE",
        "BIT",
        "BOOL",
        "BOOLEAN",
        "DATE",
        "TIME",
        "DATETIME",
        "TIMESTAMP",
        "YEAR",
    }
    | {"JSON", "GEOMCOLLECTION", "SERIAL", "INET4", "INET6", "UUID", "LONG", "VECTOR"}
)
_TEMPORAL = {"TIME", "DATETIME", "TIMESTAMP"}


class _Parser:
    def __init__(self, sql: str, default_db: str | None) -> None:
        self.sql = sql
        self.tokens = tokenize(sql)
        self.i = 0
        self.default_db = default_db

    # -- token helpers
    def peek(self, ahead: int = 0) -> Token | None:
        j = self.i + ahead
        return self.tokens[j] if j < len(self.tokens) else None

    def at_end(self) -> bool:
        tok = self.peek()
        return tok is None or (tok.kind == "sym" and tok.text == ";" and self.i == len(self.tokens) - 1)

    def next(self) -> Token:
        tok = self.peek()
        if tok is None:
            raise self.error("unexpected end of statement")
        self.i += 1
        return tok

    def accept_kw(self, *words: str) -> bool:
        tok = self.peek()
        if tok is not None and tok.is_kw(*words):
            self.i += 1
            return True
        return False

    def accept_seq(self, *words: str) -> bool:
        for k, w in enumerate(words):
            tok = self.peek(k)
            if tok is None or not tok.is_kw(w):
                return False
        self.i += len(words)
        return True

    def expect_kw(self, *words: str) -> str:
        tok = self.next()
        if not tok.is_kw(*words):
            raise self.error(f"expected {' or '.join(words)}", tok)
        return tok.text.upper()

    def accept_sym(self, sym: str) -> bool:
        tok = self.peek()
        if tok is not None and tok.kind == "sym" and tok.text == sym:
            self.i += 1
            return True
        return False

    def expect_sym(self, sym: str) -> None:
        tok = self.next()
        if tok.kind != "sym" or tok.text != sym:
            raise self.error(f"expected '{sym}'", tok)

    def is_sym(self, sym: str, ahead: int = 0) -> bool:
        tok = self.peek(ahead)
        return tok is not None and tok.kind == "sym" and tok.text == sym

    def error(self, message: str, tok: Token | None = None) -> UnparseableDdlError:
        tok = tok or self.peek()
        where = f"near {self.sql[tok.pos : tok.pos + 30]!r}" if tok else "at the end"
        return UnparseableDdlError(f"{message} {where} in: {_shorten(self.sql)}")

    def ident(self) -> str:
        tok = self.next()
        if tok.kind in ("word", "qident") or (tok.kind == "string" and tok.raw.startswith('"')):
            return tok.text
        raise self.error("expected a name", tok)

    def table_name(self) -> TableId:
        first = self.ident()
        if self.accept_sym("."):
            return TableId(first, self.ident())
        if self.default_db is None:
            raise UnparseableDdlError(
                f"table {first} has no database and there is no default database: {_shorten(self.sql)}"
            )
        return TableId(self.default_db, first)

    def skip_parens(self) -> str:
        """Skip a balanced (...) group; return its raw text."""
        start_tok = self.next()
        if start_tok.kind != "sym" or start_tok.text != "(":
            raise self.error("expected '('", start_tok)
        depth = 1
        while depth:
            tok = self.next()
            if tok.kind == "sym" and tok.text == "(":
                depth += 1
            elif tok.kind == "sym" and tok.text == ")":
                depth -= 1
        end = self.tokens[self.i - 1].pos
        return self.sql[start_tok.pos + 1 : end].strip()

    def skip_to_element_end(self) -> None:
        """Skip to the next ',' or ')' at this nesting level (not consuming it)."""
        while True:
            tok = self.peek()
            if tok is None or (tok.kind == "sym" and tok.text in ",)"):
                return
            if tok.kind == "sym" and tok.text == "(":
                self.skip_parens()
            else:
                self.i += 1

    def skip_rest(self) -> None:
        self.i = len(self.tokens)

    def expect_end(self) -> None:
        self.accept_sym(";")
        if self.peek() is not None:
            raise self.error("unexpected text")


def _shorten(sql: str) -> str:
    flat = " ".join(sql.split())
    return flat if len(flat) <= 200 else flat[:197] + "..."


def _norm_charset(name: str | None) -> str | None:
    if name is None:
        return None
    low = name.lower()
    return "utf8mb3" if low == "utf8" else low


def _charset_of_collation(collation: str) -> str:
    low = collation.lower()
    if low.startswith("utf8mb4"):
        return "utf8mb4"
    if low.startswith(("utf8mb3", "utf8_")):
        return "utf8mb3"
    return low.split("_")[0]


# ----------------------------------------------------------------------------- columns


@dataclass
class _ColumnDef:
    column: Column
    primary_key: bool = False
    json_check: bool = False


def _parse_column(p: _Parser, table_charset: str | None, table_collation: str | None) -> _ColumnDef:
    name = p.ident()
    type_tok = p.next()
    if type_tok.kind != "word":
        raise p.error("expected a data type", type_tok)
    base = type_tok.text.upper()
    charset = collation = None
    length = scale = None
    unsigned = False
    enum_values: tuple[str, ...] = ()
    nullable = True
    auto_increment = False
    if base == "NATIONAL":
        base = p.expect_kw("CHAR", "CHARACTER", "VARCHAR")
        charset = "utf8mb3"
    if base in ("CHAR", "CHARACTER") and p.accept_kw("VARYING"):
        base = "VARCHAR"
    if base == "DOUBLE":
        p.accept_kw("PRECISION")
    if base == "LONG":
        if p.accept_kw("VARBINARY"):
            base = "MEDIUMBLOB"
        else:
            p.accept_kw("VARCHAR")
            base = "MEDIUMTEXT"
    if base in ("NCHAR", "NVARCHAR"):
        charset = "utf8mb3"
    base = _TYPE_ALIASES.get(base, base)
    if base not in _KNOWN_TYPES:
        raise p.error(f"unknown data type {type_tok.text}", type_tok)
    args: list[str] = []
    if p.is_sym("("):
        if base in ("ENUM", "SET"):
            p.expect_sym("(")
            values = []
            while True:
                tok = p.next()
                if tok.kind != "string":
                    raise p.error("expected a quoted ENUM/SET value", tok)
                values.append(tok.text)
                if p.accept_sym(")"):
                    break
                p.expect_sym(",")
            enum_values = tuple(values)
        else:
            raw = p.skip_parens()
            args = [a.strip() for a in raw.split(",") if a.strip()]
    if base in ("BOOL", "BOOLEAN"):
        base, args = "TINYINT", []
    if base == "SERIAL":
        base, unsigned, nullable, auto_increment = "BIGINT", True, False, True
    if base in _INT_TYPES or base == "YEAR":
        args = []
    if base == "DECIMAL":
        length = int(args[0]) if args else 10
        scale = int(args[1]) if len(args) > 1 else 0
    elif base == "FLOAT" and len(args) == 1 and int(args[0]) > 24:
        base = "DOUBLE"
    elif base in ("CHAR", "BINARY", "BIT"):
        length = int(args[0]) if args else 1
    elif base in ("VARCHAR", "VARBINARY"):
        if not args:
            raise p.error(f"{base} needs a length", type_tok)
        length = int(args[0])
    elif base in _TEMPORAL and args:
        length = int(args[0]) or None
    # type attributes
    while True:
        if p.accept_kw("UNSIGNED"):
            unsigned = True
        elif p.accept_kw("SIGNED", "ZEROFILL", "BYTE", "ASCII", "UNICODE"):
            pass
        elif p.accept_kw("BINARY"):
            pass  # CHAR(n) BINARY: a binary collation, not a binary type
        elif p.accept_seq("CHARACTER", "SET") or p.accept_kw("CHARSET"):
            charset = _norm_charset(p.ident())
        elif p.accept_kw("COLLATE"):
            collation = p.ident().lower()
        else:
            break
    is_char = base in _CHAR_TYPES
    col = _ColumnDef(Column(name, base, length, scale, unsigned, nullable, enum_values=enum_values))
    default: str | None = None
    has_default = default_expression = False
    generated = False
    comment: str | None = None
    while True:
        tok = p.peek()
        if tok is None or (tok.kind == "sym" and tok.text in ",);") or tok.is_kw("FIRST", "AFTER"):
            break
        if p.accept_seq("NOT", "NULL"):
            nullable = False
        elif p.accept_kw("NULL"):
            nullable = True
        elif p.accept_kw("DEFAULT"):
            has_default = True
            default, default_expression = _default_value(p)
        elif p.accept_kw("AUTO_INCREMENT"):
            auto_increment = True
        elif p.accept_seq("PRIMARY", "KEY"):
            col.primary_key = True
            nullable = False
        elif p.accept_kw("UNIQUE"):
            p.accept_kw("KEY")
        elif p.accept_kw("KEY"):
            col.primary_key = True  # a lone KEY in a column definition means PRIMARY KEY
            nullable = False
        elif p.accept_kw("COMMENT"):
            comment = p.next().text
        elif p.accept_kw("COLLATE"):
            collation = p.ident().lower()
        elif p.accept_seq("CHARACTER", "SET") or p.accept_kw("CHARSET"):
            charset = _norm_charset(p.ident())
        elif p.accept_seq("ON", "UPDATE"):
            _default_value(p)
        elif p.accept_seq("GENERATED", "ALWAYS", "AS") or p.accept_kw("AS"):
            p.skip_parens()
            generated = True
        elif p.accept_kw("VIRTUAL", "STORED", "PERSISTENT"):
            generated = True
        elif p.accept_kw("CHECK"):
            text = p.skip_parens()
            if re.fullmatch(r"json_valid\(\s*`?" + re.escape(name) + r"`?\s*\)", text, re.IGNORECASE):
                col.json_check = True
        elif p.accept_kw("CONSTRAINT"):
            if not p.peek() or not p.peek().is_kw("CHECK"):
                p.ident()
        elif p.accept_kw("REFERENCES"):
            p.table_name()
            if p.is_sym("("):
                p.skip_parens()
            while True:
                if p.accept_kw("MATCH"):
                    p.next()
                elif p.accept_kw("ON"):
                    p.expect_kw("DELETE", "UPDATE")
                    if not p.accept_kw("RESTRICT", "CASCADE"):
                        if (
                            p.accept_seq("SET", "NULL")
                            or p.accept_seq("SET", "DEFAULT")
                            or p.accept_seq("NO", "ACTION")
                        ):
                            pass
                        else:
                            raise p.error("expected a referential action")
                else:
                    break
        elif p.accept_kw("INVISIBLE", "VISIBLE", "COMPRESSED"):
            pass
        elif p.accept_kw("SRID") or p.accept_kw("COLUMN_FORMAT", "STORAGE"):
            p.next()
        elif p.accept_kw("ENGINE_ATTRIBUTE", "SECONDARY_ENGINE_ATTRIBUTE"):
            p.accept_sym("=")
            p.next()
        elif p.accept_seq("WITH", "SYSTEM", "VERSIONING") or p.accept_seq("WITHOUT", "SYSTEM", "VERSIONING"):
            pass
        else:
            raise p.error(f"unexpected attribute in the definition of column {name}")
    if col.json_check and base == "LONGTEXT":
        base, charset, collation = "JSON", None, None
        is_char = False
    if is_char:
        if collation and not charset:
            charset = _charset_of_collation(collation)
        charset = charset or table_charset
        collation = collation or (table_collation if charset == table_charset else None)
    else:
        charset = collation = None
    col.column = Column(
        name,
        base,
        length,
        scale,
        unsigned,
        nullable,
        charset,
        collation,
        enum_values,
        default,
        has_default,
        auto_increment,
        generated,
        comment,
        default_expression,
    )
    return col


def _default_value(p: _Parser) -> tuple[str | None, bool]:
    """The DEFAULT's text and whether it is an expression (a function, a keyword such as
    CURRENT_TIMESTAMP, a parenthesised expression) rather than a literal."""
    tok = p.next()
    if tok.kind == "string":
        return tok.text, False
    if tok.kind == "hexbits":
        return tok.raw, False
    if tok.kind == "sym" and tok.text in "+-":
        nxt = p.next()
        return tok.text + nxt.text, False
    if tok.kind == "sym" and tok.text == "(":
        p.i -= 1
        return p.skip_parens(), True
    if tok.kind == "number":
        return tok.text, False
    if tok.kind == "word":
        if tok.text.upper() == "NULL":
            return None, False
        text = tok.text
        if p.is_sym("("):
            text += "(" + p.skip_parens() + ")"
        return text, True
    raise p.error("expected a default value", tok)


def _position_after_column(p: _Parser) -> tuple[str, str | None]:
    if p.accept_kw("FIRST"):
        return "first", None
    if p.accept_kw("AFTER"):
        return "after", p.ident()
    return "last", None


# ----------------------------------------------------------------------------- statements


class _Tables:
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


def apply_ddl(
    statement: str, default_database: str | None, tables: Mapping[TableId, TableSchema]
) -> DdlOutcome:
    """Apply one statement to `tables` (never mutated); see the module docstring."""
    p = _Parser(statement, default_database)
    view = _Tables(tables)
    first = p.peek()
    if first is None or (first.kind == "sym" and first.text == ";"):
        return DdlOutcome("ignored", (), tables)
    if first.kind != "word":
        raise p.error("not a statement")
    word = first.text.upper()
    if word == "CREATE":
        return _create(p, view)
    if word == "ALTER":
        return _alter(p, view)
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


def _ignored_object(p: _Parser) -> bool:
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


def _create(p: _Parser, view: _Tables) -> DdlOutcome:
    p.next()
    replace_existing = p.accept_seq("OR", "REPLACE")
    temporary = p.accept_kw("TEMPORARY")
    if p.accept_kw("TABLE"):
        if temporary:
            p.skip_rest()
            return DdlOutcome("ignored", (), view.original)
        if_not_exists = p.accept_seq("IF", "NOT", "EXISTS")
        table = p.table_name()
        if if_not_exists and table in view.tables:
            p.skip_rest()
            return DdlOutcome("create_table", (table,), view.original)
        schema = _create_table_body(p, table, view)
        if table in view.tables and not replace_existing and not if_not_exists:
            pass  # the server accepted it, so the old definition was gone
        view.put(schema)
        return DdlOutcome("create_table", (table,), view.result())
    if p.accept_kw("DATABASE", "SCHEMA"):
        p.accept_seq("IF", "NOT", "EXISTS")
        name = p.ident()
        p.skip_rest()
        return DdlOutcome("create_database", (), view.original, (name,))
    p.accept_kw("UNIQUE", "FULLTEXT", "SPATIAL")
    if p.accept_kw("INDEX"):
        return _index_on(p, view, "create_index")
    if _ignored_object(p):
        return DdlOutcome("ignored", (), view.original)
    raise p.error("unsupported CREATE statement")


def _index_on(p: _Parser, view: _Tables, kind: str) -> DdlOutcome:
    p.accept_seq("IF", "NOT", "EXISTS") or p.accept_seq("IF", "EXISTS")
    p.ident()
    while not p.accept_kw("ON"):
        p.next()
    table = p.table_name()
    p.skip_rest()
    return DdlOutcome(kind, (table,), view.original)


def _create_table_body(p: _Parser, table: TableId, view: _Tables) -> TableSchema:
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
            f"only known to the server): {_shorten(p.sql)}"
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
            definition = _parse_column(p, charset, collation)
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
            f"server; with binlog_format=ROW the server logs the rewritten CREATE TABLE instead): {_shorten(p.sql)}"
        )
    p.expect_end()
    return _with_primary_key(TableSchema(table, tuple(columns), (), charset, collation, comment), primary)


def _with_primary_key(schema: TableSchema, key: list[str]) -> TableSchema:
    names = []
    columns = list(schema.columns)
    for name in key:
        position = schema.position(name)
        if position is None:
            raise UnknownTableError(f"primary key column {name} is not a column of {schema.id}")
        columns[position] = replace(columns[position], nullable=False)
        names.append(columns[position].name)
    return replace(schema, columns=tuple(columns), primary_key=tuple(names))


def _key_columns(p: _Parser) -> list[str]:
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


def _table_element(p: _Parser, primary: list[str]) -> bool:
    """Constraints and indexes inside CREATE TABLE (...); True if one was consumed."""
    tok = p.peek()
    if tok is None or tok.kind != "word":
        return False
    tok = _skip_constraint_name(p)
    if tok.is_kw("PRIMARY") and p.peek(1) is not None and p.peek(1).is_kw("KEY"):
        p.i += 2
        if p.accept_kw("USING"):
            p.next()
        primary[:] = _key_columns(p)
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


def _skip_constraint_name(p: _Parser) -> Token:
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
    return tok.text.upper() in _KNOWN_TYPES or tok.text.upper() in _TYPE_ALIASES


def _table_options(p: _Parser) -> tuple[str | None, str | None, str | None]:
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
        option = _charset_option(p)
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
        charset = _charset_of_collation(collation)
    return charset, collation, comment


def _alter(p: _Parser, view: _Tables) -> DdlOutcome:
    p.next()
    p.accept_kw("ONLINE")
    p.accept_kw("IGNORE")
    if p.accept_kw("DATABASE", "SCHEMA"):
        name = p.peek()
        p.skip_rest()
        database = name.text if name is not None and name.kind in ("word", "qident") else (p.default_db or "")
        return DdlOutcome("alter_database", (), view.original, (database,))
    if not p.accept_kw("TABLE"):
        if _ignored_object(p):
            return DdlOutcome("ignored", (), view.original)
        raise p.error("unsupported ALTER statement")
    p.accept_seq("IF", "EXISTS")
    table = p.table_name()
    schema = view.get(table)
    affected = [table]
    while p.peek() is not None and not (p.is_sym(";")):
        schema = _alter_spec(p, schema, affected)
        if not p.accept_sym(","):
            break
    p.expect_end()
    if schema.id != table:
        view.drop(table)
    view.put(schema)
    return DdlOutcome("alter_table", tuple(affected), view.result())


def _alter_spec(p: _Parser, schema: TableSchema, affected: list[TableId]) -> TableSchema:
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
        definition = _parse_column(p, schema.charset, schema.collation)
        return _replace_column(p, schema, definition.column.name, definition)
    if p.accept_kw("CHANGE"):
        p.accept_kw("COLUMN")
        if_exists = p.accept_seq("IF", "EXISTS")
        old = p.ident()
        if if_exists and schema.column(old) is None:
            p.skip_to_element_end()
            return schema
        definition = _parse_column(p, schema.charset, schema.collation)
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
            value, expression = _default_value(p)
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
        charset = _norm_charset(p.ident())
        collation = p.ident().lower() if p.accept_kw("COLLATE") else None
        columns = tuple(
            replace(c, charset=charset, collation=collation) if c.type_name in _CHAR_TYPES else c
            for c in schema.columns
        )
        return replace(schema, columns=columns, charset=charset, collation=collation)
    tok = p.peek()
    if tok is not None and tok.is_kw("DEFAULT", "CHARACTER", "CHARSET", "COLLATE"):
        while (option := _charset_option(p)) is not None:
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
        "EXCHANGE",
        "ANALYZE",
        "CHECK",
        "OPTIMIZE",
        "REBUILD",
        "REPAIR",
        "REMOVE",
        "TRUNCATE",
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


def _charset_option(p: _Parser) -> tuple[str, str] | None:
    """One `[DEFAULT] CHARACTER SET|CHARSET|COLLATE [=] name` option, or None (nothing consumed)."""
    start = p.i
    p.accept_kw("DEFAULT")
    if p.accept_seq("CHARACTER", "SET") or p.accept_kw("CHARSET"):
        p.accept_sym("=")
        return "charset", _norm_charset(p.ident()) or ""
    if p.accept_kw("COLLATE"):
        p.accept_sym("=")
        return "collation", p.ident().lower()
    p.i = start
    return None


def _alter_add(p: _Parser, schema: TableSchema) -> TableSchema:
    tok = p.peek()
    if tok is None:
        raise p.error("incomplete ADD")
    tok = _skip_constraint_name(p)
    if tok.is_kw("PRIMARY"):
        p.next()
        p.expect_kw("KEY")
        if p.accept_kw("USING"):
            p.next()
        key = _key_columns(p)
        p.skip_to_element_end()
        return _with_primary_key(schema, key)
    if tok is not None and tok.is_kw(
        "INDEX", "KEY", "UNIQUE", "FULLTEXT", "SPATIAL", "FOREIGN", "CHECK", "PERIOD"
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


def _add_column(p: _Parser, schema: TableSchema, if_not_exists: bool, allow_position: bool) -> TableSchema:
    name_tok = p.peek()
    if if_not_exists and name_tok is not None and schema.column(name_tok.text) is not None:
        p.skip_to_element_end()
        return schema
    definition = _parse_column(p, schema.charset, schema.collation)
    where, anchor = _position_after_column(p) if allow_position else ("last", None)
    if schema.column(definition.column.name) is not None:
        raise UnknownTableError(f"column {definition.column.name} already exists in {schema.id}")
    columns = list(schema.columns)
    columns.insert(_insert_index(schema, columns, where, anchor), definition.column)
    schema = replace(schema, columns=tuple(columns))
    if definition.primary_key:
        schema = _with_primary_key(schema, [*schema.primary_key, definition.column.name])
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


def _replace_column(p: _Parser, schema: TableSchema, old: str, definition: _ColumnDef) -> TableSchema:
    _require_column(schema, old)
    where, anchor = _position_after_column(p)
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
        renamed = _with_primary_key(renamed, [*renamed.primary_key, new.name])
    return renamed


def _alter_drop(p: _Parser, schema: TableSchema) -> TableSchema:
    if p.accept_seq("PRIMARY", "KEY"):
        return replace(schema, primary_key=())
    tok = p.peek()
    if tok is not None and tok.is_kw("INDEX", "KEY", "FOREIGN", "CONSTRAINT", "CHECK", "PERIOD", "SYSTEM"):
        p.skip_to_element_end()
        return schema
    if tok is not None and tok.is_kw("PARTITION"):
        p.skip_rest()
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


def _drop(p: _Parser, view: _Tables) -> DdlOutcome:
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
    if _ignored_object(p):
        return DdlOutcome("ignored", (), view.original)
    raise p.error("unsupported DROP statement")


def _rename(p: _Parser, view: _Tables) -> DdlOutcome:
    p.next()
    if not p.accept_kw("TABLE", "TABLES"):
        if _ignored_object(p):
            return DdlOutcome("ignored", (), view.original)
        raise p.error("unsupported RENAME statement")
    affected: list[TableId] = []
    while True:
        old = p.table_name()
        p.expect_kw("TO")
        new = p.table_name()
        schema = view.get(old)
        view.drop(old)
        view.put(replace(schema, id=new))
        affected += [old, new]
        if not p.accept_sym(","):
            break
    p.expect_end()
    return DdlOutcome("rename_table", tuple(affected), view.result())


def parse_create_table(statement: str, default_database: str | None) -> TableSchema:
    """A table's schema from `CREATE TABLE` text (e.g. `SHOW CREATE TABLE` output)."""
    outcome = apply_ddl(statement, default_database, {})
    if outcome.kind != "create_table" or len(outcome.affected) != 1:
        raise UnparseableDdlError(f"not a CREATE TABLE statement: {_shorten(statement)}")
    return outcome.tables[outcome.affected[0]]
