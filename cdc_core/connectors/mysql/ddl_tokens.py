"""The DDL tokenizer and the token cursor the statement parsers share (part of `ddl.py`'s
parser; see its docstring), with the errors they raise."""

from __future__ import annotations

import re
from dataclasses import dataclass

from cdc_core.schema.model import TableId


class UnparseableDdlError(Exception):
    """The statement looks like table DDL but cannot be parsed."""


class UnknownTableError(UnparseableDdlError):
    """The statement changes a table or column the timeline does not know."""


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


class Parser:
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
        return UnparseableDdlError(f"{message} {where} in: {shorten(self.sql)}")

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
                f"table {first} has no database and there is no default database: {shorten(self.sql)}"
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


def shorten(sql: str) -> str:
    flat = " ".join(sql.split())
    return flat if len(flat) <= 200 else flat[:197] + "..."
