"""The file offset store: atomic replace, and a corrupt or foreign file stops the start
instead of silently starting from scratch."""

from __future__ import annotations

import pytest

from cdc_core.offsets.store import FileOffsetStore, OffsetStoreError


def test_commit_replaces_the_whole_document(tmp_path):
    store = FileOffsetStore(tmp_path / "offsets.json", "c1")
    assert store.load() is None
    store.commit({"source": {"gtids": "0-1-5"}, "snapshot": None})
    store.commit({"source": {"gtids": "0-1-9"}})
    assert FileOffsetStore(tmp_path / "offsets.json", "c1").load() == {"source": {"gtids": "0-1-9"}}
    assert not list(tmp_path.glob("*.tmp"))


@pytest.mark.parametrize(
    ("content", "message"),
    [(b'{"version":1,"offs', "not valid JSON"), (b'{"version":7,"offset":{}}', "unknown format")],
)
def test_unreadable_offsets_refuse_to_start(tmp_path, content, message):
    (tmp_path / "offsets.json").write_bytes(content)
    with pytest.raises(OffsetStoreError, match=message):
        FileOffsetStore(tmp_path / "offsets.json", "c1").load()
