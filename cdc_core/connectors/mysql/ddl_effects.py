"""What a DDL statement does to captured tables that no row event will show: rows a
partition operation removes or moves, rows foreign keys will change (both said with a
warning), and a table made system-versioned (refused)."""

from __future__ import annotations

import logging
from collections.abc import Callable

from cdc_core.connectors.mysql import ddl_tokens, server
from cdc_core.connectors.mysql.ddl_tables import DdlOutcome
from cdc_core.errors import TidemarkError
from cdc_core.schema.model import TableId

log = logging.getLogger("tidemark.mysql")


def check_effects(query: str, outcome: DdlOutcome, captures: Callable[[TableId], bool], where: str) -> None:
    """`where`: the statement's place in the binlog (`file:pos`)."""
    captured = sorted(str(t) for t in outcome.affected if captures(t))
    if not captured:
        return
    tables = ", ".join(map(str, outcome.affected))
    if outcome.rows_below_binlog:
        log.warning(server.partition_warning(tables, f"{outcome.rows_below_binlog} at {where}"))
    rules = server.cascades(query) if "FOREIGN" in query.upper() else []
    if rules:
        log.warning(server.cascade_warning(tables, rules))
    if adds_versioning(query):
        raise TidemarkError(f"{server.versioned_refusal(captured)} (DDL at {where})")


def adds_versioning(query: str) -> bool:
    """CREATE ... WITH SYSTEM VERSIONING or ALTER ... ADD SYSTEM VERSIONING (not DROP)."""
    words = [t.text.upper() for t in ddl_tokens.tokenize(query) if t.kind == "word"]
    return any(
        w == "SYSTEM" and words[i + 1 : i + 2] == ["VERSIONING"] and words[i - 1 : i] != ["DROP"]
        for i, w in enumerate(words)
    )
