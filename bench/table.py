"""The 10-column table every benchmark uses, and its generated rows."""

from __future__ import annotations

from typing import Any

DDL = (
    "CREATE TABLE {db}.t (id INT PRIMARY KEY, counter INT, name VARCHAR(40), city VARCHAR(40), "
    "amount DOUBLE, seen DATETIME, flag TINYINT, note VARCHAR(60), big BIGINT, code CHAR(4))"
)


def create(cur: Any, db: str) -> None:
    cur.execute(f"DROP DATABASE IF EXISTS {db}")
    cur.execute(f"CREATE DATABASE {db}")
    cur.execute(DDL.format(db=db))


def insert_rows(cur: Any, db: str, first: int, last: int, batch: int) -> None:
    """Rows `first..last` (ids), `batch` per INSERT statement."""
    for start in range(first, last + 1, batch):
        values = ",".join(
            f"({i},{i % 97},'name-{i}','city-{i % 50}',{i * 1.5},'2024-01-01 00:00:{i % 60:02d}',{i % 2},"
            f"'note {i}',{i * 7},'x{i % 13}')"
            for i in range(start, min(start + batch, last + 1))
        )
        cur.execute(f"INSERT INTO {db}.t VALUES {values}")
