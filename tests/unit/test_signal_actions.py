"""Signals in Debezium's formats become validated actions; anything malformed becomes a
SignalError with the reason (the channel records it as failed, streaming goes on)."""

from __future__ import annotations

import pytest

from cdc_core.schema.model import TableId
from cdc_core.signals.actions import (
    ExecuteSnapshot,
    LogSignal,
    PauseSnapshot,
    RawSignal,
    ResumeSnapshot,
    SignalError,
    StopSnapshot,
    matching_tables,
    parse_signal,
)


def parse(type_, data, id_="s1"):
    return parse_signal(RawSignal(id_, type_, data, "source"))


def test_execute_snapshot_as_in_the_seed():
    action = parse(
        "execute-snapshot",
        '{"data-collections": ["db1.table1", "db1.table2"], "type":"INCREMENTAL", '
        '"additional-conditions":[{"data-collection": "db1.table1" ,"filter":"color=\'blue\'"}], '
        '"surrogate-key": "code"}',
    )
    assert isinstance(action, ExecuteSnapshot)
    assert [p.pattern for p in action.collections] == ["db1.table1", "db1.table2"]
    assert action.snapshot_type == "incremental"
    assert action.surrogate_key == "code"
    assert action.condition_for(TableId("db1", "table1")) == "color='blue'"
    assert action.condition_for(TableId("db1", "table2")) is None


def test_defaults_and_other_actions():
    assert parse("execute-snapshot", {"data-collections": ["a.b"]}).snapshot_type == "incremental"
    assert (
        parse("execute-snapshot", {"data-collections": ["a.b"], "type": "blocking"}).snapshot_type
        == "blocking"
    )
    stop = parse("stop-snapshot", {"type": "incremental"})
    assert isinstance(stop, StopSnapshot) and stop.collections == ()
    assert [
        p.pattern
        for p in parse("stop-snapshot", {"type": "incremental", "data-collections": ["a.b"]}).collections
    ] == ["a.b"]
    assert isinstance(parse("pause-snapshot", None), PauseSnapshot)
    assert isinstance(parse("resume-snapshot", "{}"), ResumeSnapshot)
    assert parse("log", {"message": "hello"}) == LogSignal("s1", "hello")


@pytest.mark.parametrize(
    ("type_", "data", "reason"),
    [
        ("execute-snapshot", "{not json", "not valid JSON"),
        ("execute-snapshot", "[1,2]", "must be a JSON object"),
        ("execute-snapshot", {}, "needs data.data-collections"),
        ("execute-snapshot", {"data-collections": []}, "needs data.data-collections"),
        ("execute-snapshot", {"data-collections": "a.b", "type": "full"}, "incremental or blocking"),
        ("execute-snapshot", {"data-collections": ["a.("]}, "not a valid regex"),
        ("execute-snapshot", {"data-collections": [1]}, "array of table-name regexes"),
        ("execute-snapshot", {"data-collections": ["a.b"], "additional-conditions": "x"}, "must be an array"),
        (
            "execute-snapshot",
            {"data-collections": ["a.b"], "additional-conditions": [{"data-collection": "a.b"}]},
            "non-empty filter",
        ),
        ("execute-snapshot", {"data-collections": ["a.b"], "surrogate-key": 5}, "surrogate-key must be"),
        ("execute-snapshot", {"data-collections": ["a.b"], "where": "1=1"}, "unknown field"),
        ("stop-snapshot", {}, "needs data.type 'incremental'"),
        # a malformed field is refused, not read as "stop every table" as leaving it out is
        ("stop-snapshot", {"type": "incremental", "data-collections": ", "}, "names no table"),
        ("stop-snapshot", {"type": "incremental", "data-collections": []}, "names no table"),
        ("stop-snapshot", {"type": "incremental", "data-collections": 0}, "array of table-name regexes"),
        ("stop-snapshot", {"type": "incremental", "data-collections": {}}, "array of table-name regexes"),
        ("execute-snapshot", {"data-collections": ","}, "names no table"),
        ("execute-snapshot", {"data-collections": ["shop.orders{99999999999}"]}, "not a valid regex"),
        ("execute-snapshot", {"data-collections": ["(" * 600 + "a" + ")" * 600]}, "not a valid regex"),
        (
            "stop-snapshot",
            {"type": "incremental", "data-collections": ["a{4294967296}"]},
            "not a valid regex",
        ),
        ("log", {}, "needs data.message"),
        ("drop-everything", {}, "unknown signal type"),
        ("", {}, "unknown signal type"),
    ],
)
def test_malformed_signals_say_why(type_, data, reason):
    with pytest.raises(SignalError, match=reason):
        parse(type_, data)


def test_quoted_names_with_dots_match_literally():
    (pattern,) = parse("execute-snapshot", {"data-collections": ['db1."My.Table"']}).collections
    assert pattern.fullmatch("db1.My.Table")
    assert not pattern.fullmatch("db1.MyxTable")


def test_tables_outside_the_capture_list_are_refused():
    known = [TableId("shop", "orders"), TableId("shop", "users"), TableId("hr", "salaries")]
    captured = lambda t: t.database == "shop"  # noqa: E731
    patterns = parse(
        "execute-snapshot", {"data-collections": ["shop\\..*", "hr.salaries", "nope.x"]}
    ).collections
    tables, problems = matching_tables(patterns, known, captured)
    assert tables == [TableId("shop", "orders"), TableId("shop", "users")]
    assert problems == [
        "'hr.salaries' matches only tables outside the capture list",
        "'nope.x' matches no known table",
    ]


def test_each_signal_type_is_an_action_module_found_by_name():
    """Adding a signal is adding a module with an ACTION to cdc_core/signals/actions/."""
    from cdc_core.signals.actions import registered

    assert registered() == ["execute-snapshot", "log", "pause-snapshot", "resume-snapshot", "stop-snapshot"]
    with pytest.raises(SignalError, match="unknown signal type 'drop-table'; known: execute-snapshot, log, "):
        parse_signal(RawSignal("x", "drop-table", {}, "source"))


def test_an_action_acts_on_the_stage_through_the_signal_target():
    from cdc_core.signals.actions import apply_signal

    class Stage:
        def __init__(self):
            self.calls = []

        def execute_snapshot(self, action, item):
            self.calls.append(("execute", [p.pattern for p in action.collections], item))

        def stop_snapshot(self, action):
            self.calls.append(("stop", [p.pattern for p in action.collections]))

        def set_paused(self, paused):
            self.calls.append(("paused", paused))

    stage = Stage()
    for kind, data in [
        ("execute-snapshot", {"data-collections": ["shop.orders"]}),
        ("pause-snapshot", {}),
        ("resume-snapshot", {}),
        ("stop-snapshot", {"type": "incremental", "data-collections": ["shop.orders"]}),
        ("log", {"message": "hello"}),
    ]:
        apply_signal(parse_signal(RawSignal("s", kind, data, "source")), stage, "row")
    assert stage.calls == [
        ("execute", ["shop.orders"], "row"),
        ("paused", True),
        ("paused", False),
        ("stop", ["shop.orders"]),
    ]
