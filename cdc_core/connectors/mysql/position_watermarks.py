"""Read-only snapshots on MySQL/MariaDB: GTID positions as watermarks
(`cdc_core.connector.PositionWatermarks`)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from cdc_core.connectors.mysql.positions import MariaDbGtidState, MySqlGtidSet
from cdc_core.schema.model import TableId

if TYPE_CHECKING:
    from cdc_core.connectors.mysql.binlog_source import BinlogSource


class GtidWatermarks:
    """A window opens before its chunk is read, and its rows are released once the binlog
    has passed the server's GTID position read right after it."""

    def __init__(self, source: BinlogSource) -> None:
        assert source.info is not None
        self.state = MariaDbGtidState if source.info.mariadb else MySqlGtidSet
        self.source = source

    def passed(self, position: Mapping[str, Any], marker: str) -> bool:
        gtids = position.get("gtids")
        return gtids is not None and self.state.parse(gtids).succeeds(self.state.parse(marker))

    def order(self, position: Mapping[str, Any]) -> tuple[int, int]:
        return int(position.get("epoch", 0)), self.state.parse(position.get("gtids")).rank()

    def source_block(self, position: Mapping[str, Any], table: TableId | None, ts_ms: int) -> dict[str, Any]:
        block = self.source.source_block_at(
            table.database if table else "",
            table.table if table else None,
            ts_ms,
            None,
            int(position.get("pos", 0)),
            0,
        )
        block["file"] = position.get("file", block["file"])
        return block
