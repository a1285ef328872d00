"""Staged snapshot rows in the form the column rules give (no database, no Spark).

A window the Spark chunk job stages holds only what its events would carry; the streamer
makes the very same events from those staged rows as from the table's own rows, and
refuses rows staged under other rules."""

from __future__ import annotations

import datetime as dt
import decimal
import hashlib

import orjson
import pytest

from cdc_core.connectors.mysql.key_values import key_value as MYSQL_KEYS
from cdc_core.errors import TidemarkError
from cdc_core.filters import ColumnRules
from cdc_core.pipeline.ack_tracker import AckTracker
from cdc_core.pipeline.dispatcher import Dispatcher
from cdc_core.schema.model import Column, TableId, TableSchema
from cdc_core.snapshot.staged_form import StagedForm
from cdc_core.source import RowChange
from tests.unit.test_dispatcher import FakeSource, config, decoded, transaction

PEOPLE = TableSchema(
    TableId("shop", "people"),
    (
        Column("id", "INT", nullable=False),
        Column("email", "VARCHAR", length=80),
        Column("name", "VARCHAR", length=40),
        Column("secret", "VARCHAR", length=40),
        Column("pin", "INT"),
        Column("score", "BIGINT"),
        Column("born", "DATE"),
        Column("amount", "DECIMAL", length=10, scale=2),
        Column("seen", "TIMESTAMP", length=3),
        Column("notes", "TEXT"),
        Column("plain", "INT"),
    ),
    ("id",),
)
RULES = (
    "column.exclude.list: shop.people.notes\n"
    "column.truncate.to.3.chars: shop.people.(name|seen)\n"
    "column.mask.with.4.chars: shop.people.(secret|pin)\n"
    "column.mask.hash.SHA-256.with.salt.pepper: shop.people.(email|born|amount)\n"
    "column.mask.hash.MD5.with.salt.pepper: shop.people.score\n"
)
ROWS = [
    (
        1,
        "ann@example.com",
        "Annabel 🐚",
        "hunter2",
        9041,
        -77,
        dt.date(1990, 5, 17),
        decimal.Decimal("-12.50"),
        dt.datetime(2026, 1, 2, 3, 4, 5, 678000),
        "raw notes",
        5,
    ),
    (2, None, None, None, None, None, None, None, None, None, None),
]


def form_of(tmp_path, extra: str = RULES, key=("id",)) -> StagedForm:
    rules = ColumnRules(config(tmp_path, extra))
    return StagedForm(PEOPLE, rules, FakeSource().type_mapper(), key)


def events(tmp_path, rows, staged=None):
    dispatcher = Dispatcher(config(tmp_path, RULES), FakeSource(), AckTracker())
    changes = [RowChange(PEOPLE, "r", None, r, {"db": "shop", "table": "people"}, 1000, staged) for r in rows]
    records = decoded(dispatcher.process(transaction(5, *changes)))
    # Without the time each event was made (ts_ms, ts_us, ts_ns): the rest is the event.
    return [
        (t, k, {f: x for f, x in (v or {}).items() if not f.startswith("ts_")}, h) for t, k, v, h in records
    ]


def test_staged_rows_hold_what_the_events_carry_and_give_the_same_events(tmp_path):
    form = form_of(tmp_path)
    assert "notes" not in form.columns
    assert set(form.shaped) == {"email", "name", "secret", "pin", "score", "born", "amount"}
    staged = [form.shape(r) for r in ROWS]
    row = dict(zip(form.columns, staged[0], strict=True))
    assert row["email"] == hashlib.sha256(b"pepperann@example.com").hexdigest()
    assert row["score"] == hashlib.md5(b"pepper-77").hexdigest()  # the number's JSON text
    assert (
        row["born"]
        == hashlib.sha256(f"pepper{(dt.date(1990, 5, 17) - dt.date(1970, 1, 1)).days}".encode()).hexdigest()
    )
    assert (row["name"], row["secret"], row["pin"]) == ("Ann", "****", "****")
    # Unshaped columns keep the reader's value; truncation leaves a timestamp alone.
    assert (row["id"], row["plain"], row["seen"]) == (1, 5, ROWS[0][8])
    assert set(staged[1]) == {2, None}

    assert events(tmp_path, staged, staged=form) == events(tmp_path, ROWS)
    after = next(v for t, _, v, _ in events(tmp_path, ROWS) if t == "srv.shop.people")["after"]
    assert after["seen"] == "2026-01-02T03:04:05.678Z" and "notes" not in after


def test_key_columns_stay_as_read_and_a_lakehouse_release_of_them_is_refused(tmp_path):
    masked_key = RULES + "column.mask.with.2.chars: shop.people.id\n"
    form = form_of(tmp_path, masked_key)
    assert form.shape(ROWS[0])[0] == 1 and form.raw_but_shaped == ["id"]
    with pytest.raises(TidemarkError, match="key column"):
        form.check_mergeable()
    # A snapshot keyed on a column the events drop keeps it too, for the release's dedup.
    surrogate = form_of(tmp_path, key=("notes",))
    assert "notes" in surrogate.columns and surrogate.raw_but_shaped == ["notes"]
    form_of(tmp_path).check_mergeable()


def test_the_digest_names_the_columns_and_rules(tmp_path):
    same = {form_of(tmp_path).digest for _ in range(2)}
    assert len(same) == 1
    other_salt = RULES.replace("salt.pepper: shop.people.(email", "salt.paprika: shop.people.(email")
    fewer = RULES.replace("notes", "(notes|plain)")
    assert len(same | {form_of(tmp_path, other_salt).digest, form_of(tmp_path, fewer).digest}) == 3


def test_the_stage_releases_shaped_rows_only_under_the_same_rules(tmp_path):
    from cdc_core.snapshot.context import SnapshotContext
    from cdc_core.snapshot.keycodec import encode_key
    from cdc_core.snapshot.stage import SnapshotStage
    from cdc_core.snapshot.staging import LocalStaging, write_parquet

    signals = TableSchema(
        TableId("tidemark", "sig"),
        (Column("id", "VARCHAR"), Column("type", "VARCHAR"), Column("data", "VARCHAR")),
        ("id",),
    )
    form = form_of(tmp_path)
    staged = str(tmp_path / "w.parquet")
    write_parquet(staged, form.columns, [form.shape(r) for r in ROWS], strings=form.shaped)

    def signal(id_, kind, data):
        return RowChange(signals, "c", None, (id_, kind, orjson.dumps(data).decode()), {}, 1)

    def release(digest):
        stage = SnapshotStage(
            SnapshotContext(),
            {PEOPLE.id: PEOPLE, signals.id: signals},
            lambda t: t.database == "shop",
            signals.id,
            LocalStaging(tmp_path / digest),
            chunk_size=10,
            key_value=MYSQL_KEYS,
            staged_form=lambda schema, key: form,
        )
        stage.process([signal("s-1", "execute-snapshot", {"data-collections": ["shop.people"]})])
        snapshot = stage.context.active().id
        window = {"snapshot": snapshot, "window": "W", "table": "shop.people", "key": ["id"]}
        opened = {**window, "lo": encode_key(None), "hi": encode_key(None), "exact": True}
        closed = {**window, "columns": list(PEOPLE.column_names), "rows": 2, "staged": staged}
        out = stage.process(
            [
                signal("W-open", "snapshot-window-open", opened),
                signal("W-close", "snapshot-window-close", {**closed, "shaped": digest}),
            ]
        )
        return [i for i in out if isinstance(i, RowChange)]

    reads = release(form.digest)
    assert [r.after for r in reads] == [form.shape(r) for r in ROWS] and all(r.staged is form for r in reads)
    assert release("0123456789abcdef") == []  # staged under other rules: read again
