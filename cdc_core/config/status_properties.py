"""Properties of what a connector keeps for its operators to look at: the signals it
refused. Common to every connector (shown with the common ones in the reference); kept
apart from `common.py`, whose properties are about capture."""

from __future__ import annotations

from cdc_core.config.properties import Property

STATUS_PROPERTIES: list[Property] = [
    Property(
        "signal.refused.retention.days",
        "int",
        default=7,
        minimum=1,
        description="Refused signals (id, type, channel, time and reason) are kept in the snapshot state this "
        "long, across restarts, and listed by `tidemark status` and the status page; at most the newest 200 "
        "within that time (a count of older ones dropped beyond it is kept), each reason cut to 1,000 "
        "characters, so the offsets stay small.",
    ),
]
