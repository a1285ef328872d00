"""What `snapshot.mode` asks of the streamer besides the first start's snapshot (which
`snapshot_setup` begins): `when_needed` starting again where the committed position can
no longer be resumed, and `initial_only` stopping once no snapshot is running.

A lost position is handled in two steps, so a crash between them repeats the second, never
half of it. First the committed offset is replaced by itself plus a `position_lost` mark
(the reason, when), before anything is reset. Then every session that starts from a
marked offset opens the source as a first start at its position now, with order keys
above the lost position's (`Source.open_after_loss`), and snapshots every captured table
(`snapshot_setup`), until an offset of that session is committed, which carries no mark.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from cdc_core.errors import PositionLostError

if TYPE_CHECKING:
    from cdc_core.config.connector_config import ConnectorConfig
    from cdc_core.connector import Connector
    from cdc_core.snapshot.stage import SnapshotStage
    from cdc_core.source import Source

log = logging.getLogger("tidemark.streamer")

POSITION_LOST = "position_lost"


def lost_position(committed: Mapping[str, Any] | None) -> Mapping[str, Any] | None:
    """The source position a marked offset could not resume from; None for any other."""
    if committed is None or not committed.get(POSITION_LOST):
        return None
    return committed.get("source") or {}


def open_source(source: Source, committed: Mapping[str, Any] | None) -> None:
    """Open the session's source: from the committed offset, or after a lost position."""
    lost = lost_position(committed)
    if lost is not None:
        source.open_after_loss(lost)
    else:
        source.open(committed)


def session_resume(committed: dict[str, Any] | None) -> dict[str, Any] | None:
    """What the dispatcher resumes from: nothing of a lost position (no transaction to go
    on inside, a new schema timeline); the snapshot state is the stage's."""
    return None if lost_position(committed) is not None else committed


def start_again(
    config: ConnectorConfig, committed: dict[str, Any] | None, error: BaseException
) -> dict[str, Any] | None:
    """`snapshot.mode: when_needed` and a position that can no longer be resumed: the
    marked offset to commit before the streamer starts again (logged loudly: changes
    between the lost position and now are never streamed). None: the error stands."""
    if not isinstance(error, PositionLostError) or config.get("snapshot.mode") != "when_needed":
        return None
    if committed is None or committed.get(POSITION_LOST):
        return None  # nothing to lose yet, or lost again right after starting again: stop
    mark = {"reason": str(error), "at_ms": int(time.time() * 1000)}
    log.error(
        "THE COMMITTED POSITION CAN NO LONGER BE RESUMED: %s. snapshot.mode is when_needed, so the streamer "
        "starts again at the source's current position and snapshots every captured table. Changes made "
        "between the lost position and now are not streamed: the snapshot reads every row as it is now, but "
        "no event is sent for a row deleted meanwhile, so consumers (Delta tables included) keep such rows "
        "(rebuild a table from scratch to drop them). Running snapshots are abandoned.",
        error,
    )
    return {**committed, POSITION_LOST: mark}


def initial_only_done(
    config: ConnectorConfig, connector: Connector, stage: SnapshotStage, committed: Mapping[str, Any] | None
) -> bool:
    """`snapshot.mode: initial_only`: whether the streamer may stop, every snapshot done
    (the one the log reader takes itself too, such as Vitess's copy phase) and the log
    between transactions, so the commit that follows holds the final state."""
    if config.get("snapshot.mode") != "initial_only":
        return False
    if stage.busy() or stage.context.snapshots or stage.in_transaction:
        return False
    if connector.initial_snapshot_in_log:
        position = stage.last_position or (committed or {}).get("source")
        return position is not None and connector.initial_snapshot_done(position)
    return True
