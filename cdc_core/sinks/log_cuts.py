"""Where the embedded log can be cut with no source transaction open (`<root>/_cut.json`).

The merge must never commit part of a transaction, so on a range of offsets that may
begin or end inside one it counts every transaction's events against its END
(`spark_jobs.merge.transactions.split_complete`): at a million events, a quarter of the
batch's time. The log's writer sees BEGIN and END go by in order (`Record.boundary`) and
knows when none is open, so after each landing in that state it records the log's ends
there: a cut. Two cuts of one unbroken chain enclose whole transactions only, and a merge
that starts at one and ends at a later one of the same chain has nothing to align.

A chain breaks, and a new one begins, whenever the writer cannot vouch for what lies
between two cuts: it started on a log that ends past its last cut (a crash left records
of a transaction whose rest comes again, or never), or it saw an END with no transaction
open or a BEGIN inside one. A merge whose range crosses a break aligns, as it always did.

Only the latest cut is kept, replaced atomically: a merge remembers the chain and sequence
number of the cut it ended at, which is all it needs to know that its next range lies on
the same chain. Versioned JSON: `{"version": 1, "chain": ID, "seq": N, "began_empty": B,
"offsets": {topic: next offset}}`; an unreadable file, or one of a newer version, reads as
no cut (the merge aligns) and is replaced by the writer's next cut.
"""

from __future__ import annotations

import json
import logging
import secrets
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from cdc_core.durable import replace_file

log = logging.getLogger(__name__)

VERSION = 1
FILE_NAME = "_cut.json"
BEGIN, END = "BEGIN", "END"


@dataclass(frozen=True)
class Cut:
    chain: str
    seq: int  # 1, 2, ... along the chain
    began_empty: bool  # the chain began on an empty log: offset 0 of every topic is on it, as seq 0
    offsets: dict[str, int] = field(default_factory=dict)  # per topic, the next offset (absent: 0)

    def to_json(self) -> bytes:
        body = {
            "version": VERSION,
            "chain": self.chain,
            "seq": self.seq,
            "began_empty": self.began_empty,
            "offsets": dict(sorted(self.offsets.items())),
        }
        return json.dumps(body, sort_keys=True).encode()


def read_cut(root: Path) -> Cut | None:
    """The log's latest cut, or None (no file, or one this version cannot read: logged)."""
    path = Path(root) / FILE_NAME
    try:
        body = json.loads(path.read_bytes())
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as e:
        log.warning("%s is unreadable (%s): the log is read as having no cut", path, e)
        return None
    version = body.get("version") if isinstance(body, dict) else None
    if version != VERSION:
        log.warning("%s has version %r, this reader knows %d: read as no cut", path, version, VERSION)
        return None
    try:
        offsets = {str(t): int(o) for t, o in body["offsets"].items()}
        return Cut(str(body["chain"]), int(body["seq"]), bool(body["began_empty"]), offsets)
    except (KeyError, TypeError, ValueError, AttributeError) as e:
        log.warning("%s is malformed (%s): the log is read as having no cut", path, e)
        return None


class CutTracker:
    """The writer's side: fed every record as it is appended (`observe`) and asked, each
    time records are handed to landing, for the cut to record once they are durable."""

    def __init__(self, root: Path, ends: Mapping[str, int]) -> None:
        """`ends`: every topic's next offset in the log as the writer found it."""
        self.root = Path(root)
        last = read_cut(self.root)
        written = {t: o for t, o in ends.items() if o}
        if not written:  # an empty log: nothing is open, and offset 0 is on the new chain
            self._chain, self._seq, self._began_empty, self._known = _new_chain(), 0, True, True
        elif last is not None and {t: o for t, o in last.offsets.items() if o} == written:
            # Nothing after the last cut (a clean stop): that chain goes on.
            self._chain, self._seq, self._began_empty, self._known = (
                last.chain,
                last.seq,
                last.began_empty,
                True,
            )
        else:
            # Records after the last cut: a transaction may be open in them. Nothing can be
            # said of them until an END has gone by; the chain begins again after that.
            self._chain, self._seq, self._began_empty, self._known = _new_chain(), 0, False, False
        # Cuts are written only once boundaries are seen to be marked: a writer fed records
        # with no `boundary` (not the streamer's) cannot tell where a transaction ends.
        self._marked = last is not None and self._known and bool(written)
        self._open = False
        self._last_offsets = dict(last.offsets) if last is not None else {}

    def observe(self, boundary: str | None) -> None:
        """One appended record's `Record.boundary`."""
        if boundary is None:
            return
        self._marked = True
        if boundary == BEGIN:
            if self._open:  # a BEGIN inside a transaction: what came before cannot be vouched for
                self._break()
            self._open = True
        elif boundary == END:
            if not self._open and self._known:  # an END with no BEGIN seen: the same
                self._break()
            self._open, self._known = False, True

    def _break(self) -> None:
        self._chain, self._seq, self._began_empty = _new_chain(), 0, False

    def cut(self, ends: Mapping[str, int]) -> Cut | None:
        """The cut at `ends` (every topic's next offset once the records handed over so
        far are durable) when no transaction is open there and the log moved since the
        last cut; None otherwise."""
        if self._open or not self._known or not self._marked:
            return None
        offsets = {t: o for t, o in ends.items() if o}
        if offsets == self._last_offsets:
            return None
        self._seq += 1
        self._last_offsets = offsets
        return Cut(self._chain, self._seq, self._began_empty, offsets)

    def record(self, cut: Cut) -> None:
        """Make `cut` the log's latest (after the records it covers are durable)."""
        replace_file(self.root / FILE_NAME, cut.to_json())


def _new_chain() -> str:
    return secrets.token_hex(16)
