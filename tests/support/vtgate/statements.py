"""What a tablet makes of a binlog Query event: the statement's category
(`sqlparser.Preview`) and, for DDL, the tables it names (`vstreamer.mustSendDDL`).

A DDL whose tables include one of the keyspace's that the filter matches is sent as
DDL; any other DDL, database DDL (CREATE/DROP DATABASE), grants, FLUSH, ANALYZE and the
like become OTHER; SAVEPOINT is dropped. A DDL the double cannot read the tables of is
sent as DDL, as Vitess sends statements its parser rejects."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

BEGIN, COMMIT, ROLLBACK, SAVEPOINT, DML, DDL, DB_DDL, OTHER = (
    "begin", "commit", "rollback", "savepoint", "dml", "ddl", "db_ddl", "other"
)  # fmt: skip

_COMMENTS = re.compile(r"^\s*(?:(?:/\*.*?\*/|#[^\n]*\n|--\s[^\n]*\n)\s*)*", re.S)
_NAME = r"(?:`(?:[^`]|``)+`|[\w$]+)"
_REF = rf"({_NAME})(?:\s*\.\s*({_NAME}))?"
_IF = r"(?:IF\s+(?:NOT\s+)?EXISTS\s+)?"
_PATTERNS = [
    re.compile(rf"CREATE\s+(?:OR\s+REPLACE\s+)?(?:TEMPORARY\s+)?TABLE\s+{_IF}(?P<refs>{_REF})", re.I),
    re.compile(rf"ALTER\s+(?:ONLINE\s+)?(?:IGNORE\s+)?TABLE\s+(?P<refs>{_REF})", re.I),
    re.compile(rf"DROP\s+(?:TEMPORARY\s+)?TABLES?\s+{_IF}(?P<refs>{_REF}(?:\s*,\s*{_REF})*)", re.I),
    re.compile(rf"RENAME\s+TABLES?\s+(?P<refs>{_REF}\s+TO\s+{_REF}(?:\s*,\s*{_REF}\s+TO\s+{_REF})*)", re.I),
    re.compile(rf"TRUNCATE\s+(?:TABLE\s+)?(?P<refs>{_REF})", re.I),
    re.compile(rf"(?:CREATE|DROP)\s+(?:OR\s+REPLACE\s+)?(?:UNIQUE\s+|FULLTEXT\s+|SPATIAL\s+)?INDEX\s+{_IF}{_NAME}\s+ON\s+(?P<refs>{_REF})", re.I),
    re.compile(rf"(?:CREATE|ALTER)\s+(?:OR\s+REPLACE\s+)?(?:ALGORITHM\s*=\s*\w+\s+)?(?:DEFINER\s*=\s*\S+\s+)?(?:SQL\s+SECURITY\s+\w+\s+)?VIEW\s+{_IF}(?P<refs>{_REF})", re.I),
    re.compile(rf"DROP\s+VIEWS?\s+{_IF}(?P<refs>{_REF}(?:\s*,\s*{_REF})*)", re.I),
]  # fmt: skip
_DB_DDL = re.compile(rf"(?:CREATE|DROP|ALTER)\s+(?:DATABASE|SCHEMA)\s+{_IF}(?P<db>{_NAME})?", re.I)
_REF_ONLY = re.compile(_REF)


@dataclass(frozen=True)
class Statement:
    category: str
    tables: tuple[tuple[str, str], ...] = ()  # (database or "", table) named by a DDL
    database: str = ""  # the database of a CREATE/DROP DATABASE
    parsed: bool = True  # False: a DDL whose tables the double could not read


def classify(sql: str) -> Statement:
    text = _COMMENTS.sub("", sql, count=1)
    words = text.split(None, 2)
    first = words[0].lower() if words else ""
    second = words[1].lower() if len(words) > 1 else ""
    if first == "begin" or (first == "start" and second == "transaction") or first == "xa":
        return Statement(BEGIN)
    if first == "commit":
        return Statement(COMMIT)
    if first == "rollback":
        return Statement(SAVEPOINT if "to" in text.lower().split() else ROLLBACK)
    if first in ("savepoint", "release"):
        return Statement(SAVEPOINT)
    if first in ("insert", "update", "delete", "replace"):
        return Statement(DML)
    if first not in ("create", "alter", "drop", "rename", "truncate"):
        return Statement(OTHER)
    db_ddl = _DB_DDL.match(text)
    if db_ddl:
        return Statement(DB_DDL, database=_unquote(db_ddl.group("db") or ""))
    for pattern in _PATTERNS:
        found = pattern.match(text)
        if found:
            refs = []
            for ref in _REF_ONLY.finditer(found.group("refs")):
                if ref.group(0).upper() == "TO":
                    continue
                first_name, second_name = ref.group(1), ref.group(2)
                if second_name is None:
                    refs.append(("", _unquote(first_name)))
                else:
                    refs.append((_unquote(first_name), _unquote(second_name)))
            return Statement(DDL, tuple(refs))
    if second in ("user", "role", "server", "event", "procedure", "function", "trigger", "sequence"):
        return Statement(OTHER)
    return Statement(DDL, parsed=False)


def _unquote(name: str) -> str:
    if name.startswith("`") and name.endswith("`"):
        return name[1:-1].replace("``", "`")
    return name


def event_kind(
    statement: Statement,
    session_db: str,
    keyspace: str,
    foreign: Callable[[str], bool],
    matches: Callable[[str], bool],
) -> str | None:
    """`mustSendDDL`: "ddl" or "other" for a statement the stream sends, None for one on
    other tenants' databases only (`foreign`), which a shard's own MySQL never sees."""
    if statement.category == DB_DDL:
        targets = {statement.database}
    elif statement.tables:
        targets = {db or session_db for db, _ in statement.tables}
    else:
        targets = {session_db}
    if targets and all(foreign(db) for db in targets):
        return None
    if statement.category != DDL or session_db not in ("", keyspace):
        return OTHER
    if not statement.parsed:
        return DDL
    if any(db in ("", keyspace) and matches(table) for db, table in statement.tables):
        return DDL
    return OTHER
