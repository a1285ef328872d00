"""Signals in Debezium's formats become validated actions; anything malformed becomes a
SignalError with the reason (the channel records it as failed, streaming goes on)."""

from __future__ import annotations

import pytest
import yaml

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
        ("", {}, "the signal has no type: set type to one of execute-snapshot, log, "),
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
    assert problems[0].startswith(
        "'hr.salaries' matches only tables outside the capture list: they exist, but the connector's capture "
        "filters leave them out (hr.salaries)"
    )
    assert problems[1:] == ["'nope.x' matches no known table"]


def test_a_table_the_streamer_does_not_know_is_named_as_existing_outside_the_filters(tmp_path):
    """A MongoDB streamer knows only the collections it captures: a signal naming another
    one was refused as naming "no known table". The source's own list tells the two apart,
    and the refusal names the filter that leaves the table out, by the name the connector
    file gave it."""
    from cdc_core.config.connector_config import load_config
    from cdc_core.filters import TableFilter

    config = {
        "name": "m", "connector.class": "mongodb", "topic.prefix": "m", "mongodb.connection.string": "mongodb://x",
        "collection.include.list": "shop\\.orders",
    }  # fmt: skip
    (tmp_path / "m.yaml").write_text(yaml.safe_dump(config))
    filters = TableFilter(load_config(tmp_path / "m.yaml", environ={}))
    known = [TableId("shop", "orders")]  # the captured ones
    listed = [TableId("shop", "orders"), TableId("shop", "secrets")]
    patterns = parse("execute-snapshot", {"data-collections": ["shop.secrets", "shop.nothing"]}).collections
    tables, problems = matching_tables(patterns, known, filters.captures, lambda: listed, filters.excluded_by)
    assert tables == []
    assert "shop.secrets: not matched by collection.include.list" in problems[0]
    assert "matches only tables outside the capture list" in problems[0]
    assert problems[1] == "'shop.nothing' matches no known table"
    # the source away: the shorter reason, and the signal is still refused
    _, problems = matching_tables(patterns, known, filters.captures, _unreachable, filters.excluded_by)
    assert problems == ["'shop.secrets' matches no known table", "'shop.nothing' matches no known table"]


def _unreachable():
    raise OSError("connection refused")


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
