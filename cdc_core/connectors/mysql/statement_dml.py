"""Which tables a data change logged as a statement writes to.

A session may set `binlog_format=STATEMENT` (or MIXED, where the server chooses) for
itself whatever the server's setting: its INSERT, UPDATE, DELETE, REPLACE and LOAD DATA
then reach the binlog as the statement's text in a query event, with no rows. The
streamer cannot emit rows it never sees, so such a statement on a captured table is an
event it cannot process (and says so) instead of a change silently missing downstream.

The tables found are the statement's targets: the table after INSERT/REPLACE [INTO] or
LOAD DATA ... INTO TABLE, every name in UPDATE's table references (before SET) and in
DELETE's (before WHERE/ORDER/LIMIT). The last two may include tables a multi-table
statement only reads, or aliases; that errs on the side of saying too much.
"""

from __future__ import annotations

from cdc_core.connectors.mysql.ddl_tokens import Parser, Token, UnparseableDdlError, tokenize
from cdc_core.schema.model import TableId

DML_WORDS = ("INSERT", "REPLACE", "UPDATE", "DELETE", "LOAD")
_MODIFIERS = ("LOW_PRIORITY", "DELAYED", "HIGH_PRIORITY", "IGNORE", "QUICK", "CONCURRENT", "LOCAL")
_KEYWORDS = {"AS", "JOIN", "INNER", "CROSS", "STRAIGHT_JOIN", "LEFT", "RIGHT", "OUTER", "NATURAL", "ON"}
_KEYWORDS |= {"USING", "FROM", "AND", "OR", "NOT", "IS", "NULL", "PARTITION", "USE", "FORCE", "IGNORE"}
_KEYWORDS |= {"INDEX", "KEY", "FOR"}


def is_dml(query: str) -> bool:
    """Whether a query event's statement changes rows (by its first words, comments aside)."""
    tokens = tokenize(query)[:2]
    if not tokens or not tokens[0].is_kw(*DML_WORDS):
        return False
    return not (tokens[0].is_kw("LOAD") and len(tokens) > 1 and tokens[1].is_kw("INDEX"))


def dml_tables(query: str, default_db: str | None) -> set[TableId]:
    """The tables a statement-logged data change may write (see the module docstring)."""
    p = Parser(query, default_db)
    try:
        verb = p.next().text.upper()
        if verb in ("INSERT", "REPLACE"):
            while p.accept_kw(*_MODIFIERS, "INTO"):
                pass
            return {p.table_name()}
        if verb == "LOAD":
            while not p.at_end() and not p.accept_seq("INTO", "TABLE"):
                p.next()
            return {p.table_name()}
        end = ("SET",) if verb == "UPDATE" else ("WHERE", "ORDER", "LIMIT", "RETURNING")
        return _names(p, end)
    except UnparseableDdlError:
        return set()


def _names(p: Parser, end: tuple[str, ...]) -> set[TableId]:
    found: set[TableId] = set()
    depth = 0
    while not p.at_end():
        tok = p.peek()
        assert tok is not None
        if depth == 0 and tok.is_kw(*end):
            break
        if tok.kind == "sym":
            depth += {"(": 1, ")": -1}.get(tok.text, 0)
            p.next()
        elif depth == 0 and _is_name(tok):
            name = p.table_name()
            found.add(name)
        else:
            p.next()
    return found


def _is_name(tok: Token) -> bool:
    if tok.kind == "qident":
        return True
    return tok.kind == "word" and tok.text.upper() not in _KEYWORDS | set(_MODIFIERS)
