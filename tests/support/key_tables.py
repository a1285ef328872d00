"""The key types of the snapshot correctness matrix: one table per key shape.

Each table has a primary key of one or more columns, a `rid` that names the row for its
life (a primary-key change keeps it), a `version` that every update increments and a
`payload`. `key(n)` gives the n-th key (unique per n; None beyond the
type's domain), chosen to hit what broke before or could: integers of every size signed
and unsigned (BIGINT UNSIGNED around 2^63), DECIMAL, text under case- and accent-
insensitive collations with trailing spaces, BINARY and VARBINARY ending in zero bytes,
DATE, DATETIME(0-6), TIMESTAMP, negative TIME with fractions, YEAR, an ENUM whose member
order is not its text order, and composite keys mixing them (with many ties in their
leading column). `t_altered` has mostly NULL columns and gets columns added mid-run;
its name sorts first, so its windows are read first.
"""

from __future__ import annotations

import datetime as dt
import hashlib
from collections.abc import Callable
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

Key = tuple[Any, ...]


@dataclass(frozen=True)
class KeyTable:
    name: str
    key_ddl: tuple[str, ...]  # "`col` TYPE", in key order
    key: Callable[[int], Key | None]
    extra_ddl: str = ""

    @property
    def key_columns(self) -> tuple[str, ...]:
        return tuple(d.split("`")[1] for d in self.key_ddl)

    def ddl(self) -> str:
        columns = ", ".join(f"{d} NOT NULL" for d in self.key_ddl)
        extra = f", {self.extra_ddl}" if self.extra_ddl else ""
        keys = ", ".join(f"`{c}`" for c in self.key_columns)
        return (
            f"CREATE TABLE `{self.name}` ({columns}, rid INT NOT NULL, version INT NOT NULL, payload VARCHAR(40){extra}, "
            f"PRIMARY KEY ({keys})) CHARACTER SET utf8mb4"
        )


def _datetime(n: int, digits: int, base: dt.datetime = dt.datetime(2020, 1, 1)) -> dt.datetime:
    step = 10 ** (6 - digits)
    return base + dt.timedelta(seconds=n * 97, microseconds=(n * 123_457 % 1_000_000) // step * step)


def _time(n: int, digits: int) -> str:
    """TIME as text (pymysql renders negative timedeltas wrongly): odd n negative."""
    fraction = (n * 731_531 % 1_000_000) // 10 ** (6 - digits) if digits else 0
    seconds = n * 61 + n % 7
    text = f"{seconds // 3600:02d}:{seconds // 60 % 60:02d}:{seconds % 60:02d}"
    if digits:
        text += f".{fraction:0{digits}d}"
    return ("-" if n % 2 else "") + text


def _binary16(n: int) -> bytes:
    if n % 2:
        return hashlib.md5(str(n).encode()).digest()
    return n.to_bytes(3, "big") + bytes(13)  # the binlog drops these trailing zero bytes


# ENUM members in an order that is not their text order: chunks follow the member order.
ENUM_MEMBERS = tuple(f"m{(i * 37) % 120:03d}" for i in range(120))
_ENUM = "ENUM(" + ",".join(f"'{m}'" for m in ENUM_MEMBERS) + ")"


def _timestamp(c: str, p: str) -> str:
    # An explicit default: MariaDB gives a table's first TIMESTAMP ON UPDATE CURRENT_TIMESTAMP,
    # which would change the key on every update.
    return f"`{c}` TIMESTAMP{p} DEFAULT '2001-01-01 00:00:00'"


# Columns of a composite key after the first mostly meet in equality; each type leads a
# key somewhere (or is ordered after ties in the leading column) so its order counts too.
TABLES: tuple[KeyTable, ...] = (
    KeyTable(
        "t_altered",
        ("`id` INT",),
        lambda n: (n,),
        "a INT NULL, b VARCHAR(10) NULL, c DATETIME(3) NULL, d DECIMAL(8,2) NULL, e VARBINARY(8) NULL",
    ),
    KeyTable(
        "t_ints",
        ("`ti` TINYINT", "`tu` TINYINT UNSIGNED", "`si` SMALLINT", "`su` SMALLINT UNSIGNED", "`mi` MEDIUMINT",
         "`mu` MEDIUMINT UNSIGNED", "`i` INT", "`iu` INT UNSIGNED"),
        lambda n: (n % 3 - 128, 255 - n % 5, n * 37 % 65536 - 32768, 65535 - n % 7, n * 3 % 16777216 - 8388608,
                   16777215 - n % 11, n * 7919 - 2**31, 4294967295 - n),
    ),
    KeyTable(
        "t_bigints",
        ("`bu` BIGINT UNSIGNED", "`bi` BIGINT"),
        lambda n: (2**63 - 10**17 + n * 10**16 if n < 900 else None,
                   -(2**63) + n if n % 2 else 2**63 - 1 - n),
    ),
    KeyTable(
        "t_decimal_dates",
        ("`d` DECIMAL(20,4)", "`y` YEAR", "`da` DATE"),
        lambda n: (Decimal(n * 7919 - 500_000) / 10000, 1901 + n % 255, dt.date(1990, 1, 1) + dt.timedelta(days=n * 3)),
    ),
    KeyTable(
        "t_text",
        ("`code` VARCHAR(24) COLLATE utf8mb4_general_ci", "`word` VARCHAR(24) COLLATE utf8mb4_unicode_ci",
         "`tag` CHAR(6) COLLATE utf8mb4_general_ci"),
        lambda n: (f"{'K' if n % 3 == 0 else 'k'}ey-{n:05d}" + ("  " if n % 2 else ""),
                   f"{'é' if n % 2 else 'e'}{'À' if n % 3 == 0 else 'a'}-{n % 4}", f"T{n % 5} " if n % 2 else f"t{n % 5}"),
    ),
    KeyTable("t_binary", ("`vb` VARBINARY(16)", "`bn` BINARY(16)"), lambda n: (n.to_bytes(3, "big") + bytes(n % 4), _binary16(n))),
    KeyTable(
        "t_datetime",
        ("`at` DATETIME(6)", "`n` INT", *(f"`dt{p}` DATETIME({p})" for p in range(6))),
        lambda n: (_datetime(n // 3, 6), n, *(_datetime(n, p) for p in range(6))),
    ),
    KeyTable("t_timestamp", (_timestamp("ts6", "(6)"), _timestamp("ts0", ""), _timestamp("ts3", "(3)")),
             lambda n: tuple(_datetime(n, p, dt.datetime(2021, 3, 4)) for p in (6, 0, 3))),
    KeyTable("t_time", ("`tm6` TIME(6)", "`tm0` TIME", "`tm3` TIME(3)"), lambda n: tuple(_time(n, p) for p in (6, 0, 3))),
    # A key column named as Delta takes only with column mapping (space, comma) and Spark
    # reads as a path unless quoted (dot).
    KeyTable("t_enum", (f"`e` {_ENUM}", "`nth no.1,x` INT"), lambda n: (ENUM_MEMBERS[n % 120], n // 120)),
    KeyTable(
        "t_mixed",
        ("`bn` BINARY(16)", "`da` DATE", "`bu` BIGINT UNSIGNED", "`c` CHAR(8) COLLATE utf8mb4_general_ci", "`tm` TIME(3)"),
        lambda n: (
            bytes([n % 5]) + bytes(15),
            dt.date(2024, 1, 1) + dt.timedelta(days=n % 3),
            2**63 + (n - 20) * 10**14,
            f"C{n % 4}" + " " * (n % 2),
            _time(n, 3),
        ),
    ),
)  # fmt: skip

BY_NAME = {t.name: t for t in TABLES}
