"""Where a window's rows wait between the chunk read and their release at HW.

They must survive a crash: if the streamer restarts from before the window's LW, it sees
LW and HW again and must release the same rows. The in-process reader stages them in the
connector's state folder (pickle: our own files, never read from elsewhere), written with
fsync and an atomic rename before the HW is written. Files of released windows are removed
once no committed offset can lead back to them.
"""

from __future__ import annotations

import os
import pickle
import re
from pathlib import Path
from typing import Any

from cdc_core.errors import TidemarkError

_NAME = re.compile(r"[A-Za-z0-9_.-]{1,80}")


class StagingError(TidemarkError):
    """Staged rows are missing or unreadable."""


class LocalStaging:
    def __init__(self, directory: Path) -> None:
        self.directory = Path(directory)

    def _path(self, window_id: str) -> Path:
        if not _NAME.fullmatch(window_id):
            raise StagingError(f"invalid window id {window_id!r}")
        return self.directory / f"{window_id}.rows"

    def write(self, window_id: str, rows: list[tuple[Any, ...]]) -> str:
        self.directory.mkdir(parents=True, exist_ok=True)
        path = self._path(window_id)
        tmp = path.with_suffix(".tmp")
        with open(tmp, "wb") as f:
            pickle.dump(rows, f, protocol=pickle.HIGHEST_PROTOCOL)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
        return window_id

    def read(self, window_id: str) -> list[tuple[Any, ...]]:
        try:
            with open(self._path(window_id), "rb") as f:
                return pickle.load(f)
        except FileNotFoundError:
            raise StagingError(f"staged rows of window {window_id} are gone from {self.directory}") from None

    def delete(self, window_id: str) -> None:
        self._path(window_id).unlink(missing_ok=True)

    def windows(self) -> list[str]:
        if not self.directory.is_dir():
            return []
        return sorted(p.stem for p in self.directory.glob("*.rows"))
