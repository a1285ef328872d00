"""Binlog events python-mysql-replication does not read: it dropped them without a word,
and with them MySQL 8's compressed transactions (binlog_transaction_compression), its
partial JSON updates (binlog_row_value_options=PARTIAL_JSON) and the server's incident
events. The decoder child now hands over each one that may hold a change, and the parent
stops on it (or warns and skips it) like any event it cannot process. No MySQL 8 server
runs here, so the events are built byte for byte and read by the library itself."""

from __future__ import annotations

import logging
import struct
from types import SimpleNamespace

import pytest
from pymysqlreplication.event import RotateEvent
from pymysqlreplication.packet import BinLogPacketWrapper
from pymysqlreplication.row_event import PartialUpdateRowsEvent, TableMapEvent

from cdc_core.connectors.mysql import binlog_decoder as dec
from cdc_core.connectors.mysql.binlog_events import BinlogEvents
from cdc_core.connectors.mysql.compressed_events import BinlogPacket
from cdc_core.errors import TidemarkError


def read(kind: int, body: bytes, next_pos: int) -> object:
    """The event the library makes of these bytes, given the child's list of events."""
    header = struct.pack("<IBIIIH", 1700000000, kind, 1, 19 + len(body), next_pos, 0)
    packet = BinlogPacket(b"\x00" + header + body, "utf8")
    allowed = frozenset(dec.EVENTS) | {TableMapEvent, RotateEvent}
    args = (None, None, None, None, False, False, False, False, False)
    wrapper = BinLogPacketWrapper(
        packet,
        {},
        SimpleNamespace(charset="utf8", _get_dbms=lambda: "mysql"),
        (8, 0, 40),
        False,
        allowed,
        *args,
    )
    return wrapper.event


class Done(Exception):
    pass


def pumped(events: list[object]) -> list[tuple]:
    """The records the child sends for `events`, then a heartbeat that sends the batch."""
    stream = SimpleNamespace(log_pos=9000)
    rest = iter([*events[1:], read(0x1B, b"mariadb-bin.000001", 0)])

    def fetchone() -> object:
        event = next(rest, None)
        if event is None:
            raise Done
        return event

    stream.fetchone = fetchone
    sent: list[tuple] = []
    with pytest.raises(Done):
        dec._pump(SimpleNamespace(send=sent.append), stream, events[0], None, None)
    return [record for message in sent for record in message[1]]


def test_event_types_the_library_does_not_read_are_handed_over_unless_they_hold_no_change():
    incident = read(0x1A, b"\x01\x00" + bytes([11]) + b"LOST_EVENTS", 1100)
    anonymous_gtid = read(0x22, bytes(25), 1200)  # MySQL without GTIDs: every transaction has one
    payload = read(0x28, b"\x02\x01\x03" + bytes(40), 1400)  # a compressed transaction
    unknown = read(0x37, b"\x00" * 8, 1500)
    records = pumped([incident, anonymous_gtid, payload, unknown])
    assert records[:-1] == [
        (dec.UNREADABLE, 0x1A, 1100 - 19 - 14, 1100),
        (dec.UNREADABLE, 0x28, 1400 - 19 - 43, 1400),
        (dec.UNREADABLE, 0x37, 1500 - 19 - 8, 1500),
    ]
    assert records[-1][0] == dec.HEARTBEAT


def events_at(mode: str) -> BinlogEvents:
    events = BinlogEvents()
    events.failure_mode, events.file = mode, "binlog.000007"
    return events


def test_an_unreadable_event_stops_the_streamer_saying_what_it_is_and_what_to_set():
    with pytest.raises(TidemarkError) as stopped:
        events_at("fail")._handle((dec.UNREADABLE, 0x28, 1338, 1400), [])
    said = str(stopped.value)
    assert "binlog.000007:1338" in said and "binlog_transaction_compression=OFF" in said
    with pytest.raises(TidemarkError, match="an event of type 0x37, which this streamer does not know"):
        events_at("fail")._handle((dec.UNREADABLE, 0x37, 1473, 1500), [])
    with pytest.raises(TidemarkError, match="an incident event"):
        events_at("fail")._handle((dec.UNREADABLE, 0x1A, 1067, 1100), [])


def test_with_warn_an_unreadable_event_is_skipped_with_a_warning(caplog):
    batch: list = []
    with caplog.at_level(logging.WARNING, "tidemark.mysql"):
        events_at("warn")._handle((dec.UNREADABLE, 0x28, 1338, 1400), batch)
    assert batch == [] and "binlog_transaction_compression=OFF" in caplog.text and "skipped" in caplog.text


def test_a_partial_json_update_is_a_row_event_that_cannot_be_decoded():
    """Its JSON columns hold diffs, which the library reads as if they were the values."""
    event = object.__new__(PartialUpdateRowsEvent)
    columns = [SimpleNamespace(name="id", type=3), SimpleNamespace(name="doc", type=245)]
    packet = SimpleNamespace(log_pos=2000, packet=None, event_size=60)
    event.__dict__.update(
        table_id=7, columns=columns, schema="shop", table="orders", timestamp=1, packet=packet
    )
    record = dec._rows(event, dec.OP_UPDATE, {})
    assert record[:8] == (dec.ROWS, dec.OP_UPDATE, "shop", "orders", ("id", "doc"), 1, 2000 - 60, 2000)
    decoded, error = record[8:]
    assert decoded is None and "binlog_row_value_options=PARTIAL_JSON" in error
