"""`additional-conditions` are untrusted: only the predicate grammar over existing columns
is accepted, literals become parameters, identifiers are quoted by the dialect."""

from __future__ import annotations

import re
from decimal import Decimal

import pytest

from cdc_core.signals.conditions import ConditionError, columns_of, parse_condition, render

COLUMNS = ["id", "color", "quantity", "created_at", "Brand", "odd`name"]


def mysql_quote(name: str) -> str:
    return "`" + name.replace("`", "``") + "`"


def sql(text: str) -> tuple[str, list]:
    return render(parse_condition(text, COLUMNS), mysql_quote)


@pytest.mark.parametrize(
    ("text", "expected_sql", "params"),
    [
        ("color = 'blue'", "`color` = %s", ["blue"]),
        ("color='it''s' AND quantity>10", "(`color` = %s AND `quantity` > %s)", ["it's", 10]),
        ("quantity <> 1.5", "`quantity` != %s", [Decimal("1.5")]),
        ("NOT (color = 'red' OR brand = 'x')", "NOT ((`color` = %s OR `Brand` = %s))", ["red", "x"]),
        ("id IN (1, 2, 3)", "`id` IN (%s, %s, %s)", [1, 2, 3]),
        ("id NOT IN (4)", "`id` NOT IN (%s)", [4]),
        (
            "created_at BETWEEN '2024-01-01' AND '2024-02-01'",
            "`created_at` BETWEEN %s AND %s",
            ["2024-01-01", "2024-02-01"],
        ),
        ("color IS NOT NULL", "`color` IS NOT NULL", []),
        ("color not like 'bl%'", "`color` NOT LIKE %s", ["bl%"]),
        ("`odd``name` = -3", "`odd``name` = %s", [-3]),
        ('"color" = TRUE', "`color` = %s", [True]),
        ("id = 1 OR id = 2 AND color = 'x'", "(`id` = %s OR (`id` = %s AND `color` = %s))", [1, 2, "x"]),
    ],
)
def test_the_grammar_renders_quoted_identifiers_and_bound_literals(text, expected_sql, params):
    assert sql(text) == (expected_sql, params)


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("color = 'blue'; DROP TABLE orders", "unexpected character ';'"),
        ("1 = 1", "expected a column name"),
        ("id = 1 OR 1 = 1", "expected a column name"),
        ("color = blue", "comparing columns is not allowed"),
        ("secret = 'x'", "unknown column 'secret'"),
        ("id = (SELECT 1)", "expected a value"),
        ("id = 1 -- comment", "unexpected"),
        ("id = 1 /* x */", "unexpected character '/'"),
        ("sleep(5) = 0", "unknown column 'sleep'"),
        ("id IN ()", "expected a value"),
        ("id LIKE 5", "LIKE needs a string pattern"),
        ("", "empty condition"),
        ("(" * 40 + "id = 1" + ")" * 40, "nested too deeply"),
        ("color = 'unterminated", "unexpected character"),
        ("id = 1 id = 2", "unexpected 'id'"),
        ("id ^ 2", "unexpected character '^'"),
        # written out for a server, 1e999999999 is a gigabyte of digits
        ("id > 1e999999999", "out of range: at most 65 digits, exponents within ±308"),
        ("id > 1e-309", "out of range"),
        ("quantity = " + "9" * 66, "out of range"),
        ("id > 1e99999999999999999999", "out of range"),
    ],
)
def test_anything_else_is_refused_with_a_reason(text, reason):
    with pytest.raises(ConditionError, match=re.escape(reason)):
        parse_condition(text, COLUMNS)


def test_numbers_within_the_bounds_keep_every_digit():
    assert sql("id > 1e308 AND quantity = " + "9" * 65)[1] == [Decimal("1e308"), int("9" * 65)]
    assert sql("id > -1.5E-308")[1] == [Decimal("-1.5E-308")]


def test_columns_are_matched_case_insensitively_and_reported():
    condition = parse_condition("COLOR = 'x' AND (brand IS NULL OR NOT Quantity < 3)", COLUMNS)
    assert columns_of(condition) == {"color", "Brand", "quantity"}


def test_a_backslash_in_a_literal_stays_data():
    """Only '' escapes a quote; a backslash is an ordinary character bound as data, so the
    classic backslash-quote break-out ends the string early and the rest is refused."""
    assert sql(r"color = 'a\'") == ("`color` = %s", ["a\\"])
    with pytest.raises(ConditionError):
        parse_condition(r"color = 'a\' OR 1=1 -- '", COLUMNS)


def test_a_document_collections_filter_may_name_any_field_but_no_operator():
    from cdc_core.signals.conditions import ANY_FIELD

    condition = parse_condition("status = 'paid' AND `address.city` IN ('Oslo', 'Bergen')", ANY_FIELD)
    assert columns_of(condition) == {"status", "address.city"}
    for hostile in (
        "`$where` = 'sleep(1000)'",
        "`$expr` > 0",
        "status = 1; db.dropDatabase()",
        "`a.$gt` = 1",
        "`a..b` = 1",
    ):
        with pytest.raises(ConditionError):
            parse_condition(hostile, ANY_FIELD)


def test_dotted_paths_name_a_document_collections_nested_fields_without_backquotes():
    from cdc_core.signals.conditions import ANY_FIELD

    condition = parse_condition("address.city = 'Oslo' AND items.0.sku IN ('a') AND `a.b` > 1", ANY_FIELD)
    assert columns_of(condition) == {"address.city", "items.0.sku", "a.b"}
    for hostile in ("a.$where = 1", "a..b = 1", "a. = 1", "$x.a = 1"):
        with pytest.raises(ConditionError):
            parse_condition(hostile, ANY_FIELD)
    # a SQL table's filter: a dotted name is no column of it, and says where dots go
    with pytest.raises(ConditionError, match="unknown column 'orders.color' .a dotted name is a field path"):
        parse_condition("orders.color = 'x'", COLUMNS)


def test_date_literals_are_bound_as_dates_and_timestamps_by_a_sql_source():
    import datetime as dt

    text = (
        "created_at >= TIMESTAMP '2025-03-01 10:00:00.25' AND created_at < DATE '2025-03-02' "
        "AND created_at <> ISODate('2025-03-01T12:00:00+02:00') AND created_at IN (TIMESTAMP '2025-03-01 11:00:00Z')"
    )
    assert sql(text) == (
        "(`created_at` >= %s AND `created_at` < %s AND `created_at` != %s AND `created_at` IN (%s))",
        [
            dt.datetime(2025, 3, 1, 10, 0, 0, 250000),  # as written: SQL's wall-clock time
            dt.date(2025, 3, 2),
            dt.datetime(2025, 3, 1, 10, 0),  # an instant, as UTC (the readers' session time zone)
            dt.datetime(2025, 3, 1, 11, 0),
        ],
    )
    # the literal words are case-insensitive, and a column may still be named date
    assert sql("created_at = date '2025-03-01'")[1] == [dt.date(2025, 3, 1)]
    assert parse_condition("date = 1", ["date"]) is not None


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        (
            "id = ObjectId('596e275826f08b2730779e1f')",
            "an ObjectId is a MongoDB value: no column of a SQL table",
        ),
        ('{"color": "blue"}', "filters a document collection; this table's filter is written in the grammar"),
        ("created_at > DATE '2025-13-01'", "DATE '2025-13-01': month must be in 1..12"),
        ("created_at > ISODate('yesterday')", "ISODate takes an ISO date or timestamp"),
        ("created_at > TIMESTAMP '2025-03-01 25:00:00'", "hour must be in 0..23"),
        ("created_at > ISODate(5)", "ISODate(...) takes one quoted text"),
    ],
)
def test_literals_a_sql_table_cannot_compare_with_are_refused_with_the_reason(text, reason):
    with pytest.raises(ConditionError, match=re.escape(reason)):
        parse_condition(text, COLUMNS)


def test_an_objectid_literal_in_a_document_collection_and_its_mistakes():
    from cdc_core.signals.conditions import ANY_FIELD
    from cdc_core.signals.literals import ObjectIdLiteral

    condition = parse_condition('_id = ObjectId("596E275826F08B2730779E1F")', ANY_FIELD)
    assert condition.value == ObjectIdLiteral("596e275826f08b2730779e1f")
    with pytest.raises(ConditionError, match="an ObjectId is 24 hexadecimal digits, not '12'"):
        parse_condition("_id = ObjectId('12')", ANY_FIELD)
    # the word alone is a field name, as before
    assert columns_of(parse_condition("ObjectId = 1", ANY_FIELD)) == {"ObjectId"}
