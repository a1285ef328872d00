"""Column definitions in DDL: types (with their aliases normalised, see `ddl.py`), lengths,
charsets and collations, nullability, defaults (literal or expression)."""

from __future__ import annotations

import re
from dataclasses import dataclass

from cdc_core.connectors.mysql.ddl_tokens import Parser
from cdc_core.connectors.mysql.spatial import GEOMETRY_TYPES
from cdc_core.connectors.mysql.types import BINARY_TYPES, CHAR_TYPES, INT_TYPES
from cdc_core.schema.model import Column

TYPE_ALIASES = {
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


CHARSET_TYPES = CHAR_TYPES | {"ENUM", "SET"}  # the types a charset applies to


KNOWN_TYPES = (
    _INT_TYPES
    | CHARSET_TYPES
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


def norm_charset(name: str | None) -> str | None:
    if name is None:
        return None
    low = name.lower()
    return "utf8mb3" if low == "utf8" else low


def charset_of_collation(collation: str) -> str:
    low = collation.lower()
    if low.startswith("utf8mb4"):
        return "utf8mb4"
    if low.startswith(("utf8mb3", "utf8_")):
        return "utf8mb3"
    return low.split("_")[0]


@dataclass
class ColumnDef:
    column: Column
    primary_key: bool = False
    json_check: bool = False


def parse_column(p: Parser, table_charset: str | None, table_collation: str | None) -> ColumnDef:
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
    base = TYPE_ALIASES.get(base, base)
    if base not in KNOWN_TYPES:
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
            charset = norm_charset(p.ident())
        elif p.accept_kw("COLLATE"):
            collation = p.ident().lower()
        else:
            break
    is_char = base in CHARSET_TYPES
    col = ColumnDef(Column(name, base, length, scale, unsigned, nullable, enum_values=enum_values))
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
            default, default_expression = default_value(p)
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
            charset = norm_charset(p.ident())
        elif p.accept_seq("ON", "UPDATE"):
            default_value(p)
        elif p.accept_seq("GENERATED", "ALWAYS", "AS") or p.accept_kw("AS"):
            if not p.accept_seq("ROW", "START") and not p.accept_seq("ROW", "END"):  # MariaDB's periods
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
            charset = charset_of_collation(collation)
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


def default_value(p: Parser) -> tuple[str | None, bool]:
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


def position_after_column(p: Parser) -> tuple[str, str | None]:
    if p.accept_kw("FIRST"):
        return "first", None
    if p.accept_kw("AFTER"):
        return "after", p.ident()
    return "last", None
