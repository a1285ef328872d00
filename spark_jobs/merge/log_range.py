"""Which offsets of the embedded log a merge batch reads, and whether it must align them.

A batch ends at the log's latest cut (`cdc_core.sinks.log_cuts`) when there is one past
what was merged, so that the next batch starts at a cut too. It reads whole transactions
only, and skips the count of every transaction's events, when it starts where the chain
of that cut began or at a cut of the same chain the merge ended at before, and the
batch before it held nothing back. Otherwise (no cut yet, a broken chain, records held
back, a merge that ran before cuts existed, or before the JSON-lines writer recorded them,
and read past the latest one) it aligns, as every Kafka batch does.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cdc_core.durable import replace_file
from cdc_core.sinks.log_cuts import read_cut


@dataclass(frozen=True)
class LogRange:
    until: dict[str, int] | None  # per topic, the first offset not read; None: the log's end
    whole: bool  # the range holds whole transactions only
    at: dict[str, Any] | None  # the cut it ends at (`chain`, `seq`): saved with the offsets

    def reached(self, done: Mapping[str, int]) -> dict[str, int] | None:
        """The last offset read of each topic with records after `done` (None: not known
        before reading)."""
        if self.until is None:
            return None
        return {t: end - 1 for t, end in self.until.items() if end - 1 > done.get(t, -1)}


def plan_range(
    root: Path, topics: Iterable[str], done: Mapping[str, int], at: Mapping[str, Any] | None, holding: bool
) -> LogRange:
    """`done`: per topic the last offset merged; `at`: the cut the last batch ended at;
    `holding`: the last batch held records back."""
    cut = read_cut(root)
    topics = list(topics)
    if cut is None:
        return LogRange(None, False, None)
    if (
        cut.began_empty
        and at is not None
        and at.get("chain") != cut.chain
        and any(v >= 0 for v in done.values())
    ):
        from cdc_core.errors import TidemarkError

        # Its chain began on an empty log after the one this merge ended on: the log was
        # reset or replaced, and its offsets start again under what was merged.
        raise TidemarkError(
            f"the embedded log {root} began again on an empty log (cut chain {cut.chain}) after this merge's "
            f"last batch (chain {at.get('chain')}, merged up to {dict(sorted(done.items()))}): reading on "
            "would skip the new log's first records. Give the merge a new checkpoint folder to merge the new "
            "log from its start (the Delta tables keep their rows; events merged again change nothing)"
        )
    until = {t: cut.offsets.get(t, 0) for t in topics}
    if any(until[t] - 1 < done.get(t, -1) for t in topics):
        return LogRange(None, False, None)  # merged past the cut: read to the end and align
    from_start = cut.began_empty and all(done.get(t, -1) < 0 for t in topics)
    on_chain = at is not None and at.get("chain") == cut.chain and int(at.get("seq", -1)) <= cut.seq
    whole = (from_start or on_chain) and not holding
    return LogRange(until, whole, {"chain": cut.chain, "seq": cut.seq})


STATE_VERSION = 2
STATE_FILE = "local-offsets.json"


@dataclass(frozen=True)
class MergeState:
    """What a merge of the embedded log keeps under its checkpoint between batches:
    `{"version": 2, "batch": N, "offsets": {topic: last offset merged}, "cut": {"chain",
    "seq"} or null}`. Version 1 (no `version` field, no `cut`) reads as having ended at no
    cut: its next batch aligns."""

    batch: int = 0
    offsets: dict[str, int] = field(default_factory=dict)
    cut: dict[str, Any] | None = None

    @classmethod
    def load(cls, checkpoint: str | Path) -> MergeState:
        path = Path(checkpoint) / STATE_FILE
        if not path.exists():
            return cls()
        body = json.loads(path.read_text())
        version = body.get("version", 1)
        if version > STATE_VERSION:
            from cdc_core.errors import TidemarkError

            raise TidemarkError(f"{path} has version {version}; this merge reads up to {STATE_VERSION}")
        return cls(int(body["batch"]), {t: int(o) for t, o in body["offsets"].items()}, body.get("cut"))

    def save(self, checkpoint: str | Path) -> None:
        """Replaced whole: a crash leaves the old state, and the batch runs again."""
        path = Path(checkpoint) / STATE_FILE
        path.parent.mkdir(parents=True, exist_ok=True)
        body = {"version": STATE_VERSION, "batch": self.batch, "offsets": self.offsets, "cut": self.cut}
        replace_file(path, json.dumps(body, sort_keys=True).encode())
