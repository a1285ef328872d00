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
