"""Release decisions (`cdc_core/snapshot/release_decisions.py`): what a window's HW released,
kept as typed JSON, read back exactly, and read from the pickles older versions wrote."""

from __future__ import annotations

import base64
import datetime as dt
import decimal

import pytest

from cdc_core.errors import TidemarkError
from cdc_core.schema.model import TableId
from cdc_core.snapshot.release_decisions import ReleaseDecision
from cdc_core.snapshot.staging import LocalStaging
from cdc_core.snapshot.windows import Window
from cdc_core.source import TransactionBegin

WINDOW = Window("sig-1.t.3", "sig-1", TableId("shop", "t"), (3,), (9,), True, ("id",), {(5,)}, False, 3, 9)
SOURCE = {"file": "mariadb-bin.000003", "pos": 4, "gtids": "0-1-12"}
ROW = (4, "a", decimal.Decimal("1.50"), dt.datetime(2024, 1, 2, 3, 4, 5), b"\x00\x01", None)
# A decision as Tidemark pickled it before the JSON format (the same window, source and row).
LEGACY = (
    "gAWV3gEAAAAAAAB9lCiMBnNvdXJjZZR9lCiMBGZpbGWUjBJtYXJpYWRiLWJpbi4wMDAwMDOUjANwb3OUSwSMBWd0aWRzlIwGMC0xLTEylHWMBnNo"
    "YXBlZJROjAZ3aW5kb3eUjBljZGNfY29yZS5zbmFwc2hvdC53aW5kb3dzlIwGV2luZG93lJOUKYGUfZQojAJpZJSMCXNpZy0xLnQuM5SMC3NuYXBz"
    "aG90X2lklIwFc2lnLTGUjAV0YWJsZZSMFWNkY19jb3JlLnNjaGVtYS5tb2RlbJSMB1RhYmxlSWSUk5QpgZR9lCiMCGRhdGFiYXNllIwEc2hvcJRo"
    "E4wBdJR1YowCbG+USwOFlIwCaGmUSwmFlIwLZXhhY3RfcmFuZ2WUiIwLa2V5X2NvbHVtbnOUaA+FlIwIcmVjb3JkZWSUj5QoSwWFlJCMDnNjaGVt"
    "YV9jaGFuZ2VklImMBWluZGV4lEsDjAJvZpRLCYwGaW5fbG9nlIh1YowEcm93c5RdlChLBIwBYZSMB2RlY2ltYWyUjAdEZWNpbWFslJOUjAQxLjUw"
    "lIWUUpSMCGRhdGV0aW1llIwIZGF0ZXRpbWWUk5RDCgfoAQIDBAUAAACUhZRSlEMCAAGUTnSUYYwHZHJvcHBlZJRLAXUu"
)


def test_a_stream_release_is_kept_as_json_and_read_back_exactly(tmp_path):
    staging = LocalStaging(tmp_path)
    decision = ReleaseDecision(WINDOW, SOURCE, "digest", (ROW,), dropped=1)
    staging.write_release("sig-1.t.3", decision)
    assert (tmp_path / "sig-1.t.3.release").read_bytes().startswith(b'{"version":1,')
    assert staging.read_release("sig-1.t.3") == decision
    assert staging.read_release("gone") is None


def test_a_read_only_release_keeps_its_synthetic_begin_and_marker():
    window = Window("w9", "sig-2", TableId("shop", "t"), None, (4,), in_log=False)
    begin = TransactionBegin("snapshot-window-w9", 0, 17, 1700000000000, {"gtids": "0-1-17"}, synthetic="w9")
    decision = ReleaseDecision(window, SOURCE, None, (ROW,), 0, begin, "0-1-18", ("id", "v"))
    again = ReleaseDecision.from_bytes(decision.to_bytes())
    assert again == decision and again.window.in_log is False


def test_a_decision_pickled_by_an_older_version_is_read(tmp_path):
    (tmp_path / "sig-1.t.3.release").write_bytes(base64.b64decode(LEGACY))
    decision = LocalStaging(tmp_path).read_release("sig-1.t.3")
    assert decision == ReleaseDecision(WINDOW, SOURCE, None, (ROW,), dropped=1)


def test_a_decision_of_a_newer_format_is_refused():
    with pytest.raises(TidemarkError, match="format version 2"):
        ReleaseDecision.from_bytes(b'{"version":2}')
