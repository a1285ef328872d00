"""Seed 004's type mapping: VStream's text forms (binlog phase and copy phase) decoded
into one Python value per stored value, then Debezium's Vitess event form."""

from __future__ import annotations

import pytest

from cdc_core.connectors.vitess.fields import column_of, decoder
from cdc_core.connectors.vitess.types import VitessModes, VitessTypeMapper
from cdc_core.errors import UnsupportedTypeError

# (column type, VStream text in the binlog phase, the copy phase's text, Connect type,
#  semantic name, event value) under the default modes
CASES = [
    ("tinyint(4)", b"-128", b"-128", "int16", None, -128),
    ("tinyint(1)", b"1", b"1", "int16", None, 1),
    ("smallint(5) unsigned", b"65535", b"65535", "int32", None, 65535),
    ("mediumint(9)", b"-8388608", b"-8388608", "int32", None, -8388608),
    ("int(10) unsigned", b"4294967295", b"4294967295", "int64", None, 4294967295),
    ("bigint(20)", b"-9223372036854775808", b"-9223372036854775808", "int64", None, -(2**63)),
    (
        "bigint(20) unsigned",
        b"18446744073709551615",
        b"18446744073709551615",
        "string",
        None,
        "18446744073709551615",
    ),
    ("float", b"1.1E+00", b"1.1", "double", None, 1.100000023841858),
    ("double", b"3.14E+00", b"3.14", "double", None, 3.14),
    ("decimal(5,2)", b".50", b"0.50", "string", None, "0.50"),
    ("decimal(20,0)", b"000000000000000001", b"1", "string", None, "1"),
    ("decimal(10,4)", b"-1.2300", b"-1.2300", "string", None, "-1.2300"),
    # beyond Python's default 28 digits, as money and token amounts often are
    (
        "decimal(38,18)",
        b"12345678901.5",
        b"12345678901.500000000000000000",
        "string",
        None,
        "12345678901.500000000000000000",
    ),
    (
        "decimal(65,30)",
        b"0.5",
        b"0.500000000000000000000000000000",
        "string",
        None,
        "0.500000000000000000000000000000",
    ),
    ("varchar(16)", "ünï".encode(), "ünï".encode(), "string", None, "ünï"),
    ("json", b'{"a": 1}', b'{"a": 1}', "string", "io.debezium.data.Json", '{"a": 1}'),
    ("enum('small','medium','large')", b"medium", b"medium", "string", "io.debezium.data.Enum", "medium"),
    ("set('a','b','c')", b"a,c", b"a,c", "string", "io.debezium.data.EnumSet", "a,c"),
    ("year(4)", b"2020", b"2020", "int32", "io.debezium.time.Year", 2020),
    ("bit(1)", b"\x01", b"\x01", "boolean", None, True),
    ("bit(12)", b"\x08\x05", b"\x08\x05", "bytes", "io.debezium.data.Bits", "CAU="),
    ("binary(4)", b"ab\x00\x00", b"ab\x00\x00", "bytes", None, "YWIAAA=="),
    ("date", b"2020-01-02", b"2020-01-02", "int32", "io.debezium.time.Date", 18263),
    ("time(3)", b"-01:02:03.250", b"-01:02:03.250", "int64", "io.debezium.time.MicroTime", -3_723_250_000),
    (
        "datetime",
        b"2018-06-20 06:37:03",
        b"2018-06-20 06:37:03",
        "int64",
        "io.debezium.time.Timestamp",
        1529476623000,
    ),
    (
        "datetime(6)",
        b"2018-06-20 06:37:03.000123",
        b"2018-06-20 06:37:03.000123",
        "int64",
        "io.debezium.time.MicroTimestamp",
        1529476623000123,
    ),
    (
        "timestamp(3)",
        b"2020-02-13 01:02:03.120",
        b"2020-02-13 01:02:03.120",
        "string",
        "io.debezium.time.ZonedTimestamp",
        "2020-02-13T01:02:03.120Z",
    ),
    (
        "timestamp",
        b"2020-02-13 01:02:03",
        b"2020-02-13 01:02:03",
        "string",
        "io.debezium.time.ZonedTimestamp",
        "2020-02-13T01:02:03Z",
    ),
]


@pytest.mark.parametrize(
    ("type_", "streamed", "copied", "kind", "logical", "value"), CASES, ids=[c[0] for c in CASES]
)
def test_both_phases_give_the_seeds_event_value(type_, streamed, copied, kind, logical, value):
    column = column_of("c", type_, nullable=True, collation="utf8mb4_general_ci" if "char" in type_ else None)
    mapping = VitessTypeMapper(VitessModes()).map_column(column)
    assert mapping.schema["type"] == kind
    assert mapping.schema.get("name") == logical
    decode = decoder(column)
    assert decode(streamed) == decode(copied), "one stored value, two Python values"
    assert mapping.convert(decode(streamed)) == value


def test_enum_and_set_members_come_from_the_column_type():
    column = column_of("size", "enum('s','it''s','l')", nullable=False)
    assert column.enum_values == ("s", "it's", "l")
    mapping = VitessTypeMapper(VitessModes()).map_column(column)
    assert mapping.schema["parameters"] == {"allowed": "s,it's,l"}


@pytest.mark.parametrize(
    "charset, text",
    [("utf16", "привет 😀"), ("utf32", "ñ 😀"), ("ucs2", "Ωmega"), ("utf16le", "日本語"), ("latin1", "café €"),
     ("macce", "Łódź"), ("utf8mb4", "ünï 😀"), ("cp1251", "привет")],
)  # fmt: skip
def test_text_is_read_in_its_columns_charset_as_mysql_stores_it(charset, text):
    """MySQL's UTF-16, UTF-32 and UCS-2 are big-endian (Python's `utf16` reads them
    little-endian), its latin1 is Windows-1252, and `ucs2`, `utf16le`, `macce` are not
    Python's names."""
    from cdc_core.connectors.mysql.charsets import python_codec
    from cdc_core.schema.model import Column

    stored = {"utf16": "utf-16-be", "utf32": "utf-32-be", "ucs2": "utf-16-be", "utf16le": "utf-16-le"}
    raw = text.encode(stored.get(charset, python_codec(charset)))
    if charset == "utf16":
        assert raw[:2] == b"\x04\x3f"  # big-endian, no byte-order mark
    assert decoder(Column("t", "VARCHAR", 20, charset=charset))(raw) == text


def test_zero_dates_are_null_or_the_epoch_in_a_not_null_column():
    nullable = column_of("d", "datetime", nullable=True)
    required = column_of("d", "datetime", nullable=False)
    zero = decoder(nullable)(b"0000-00-00 00:00:00")
    assert zero is None
    mapper = VitessTypeMapper(VitessModes())
    assert mapper.map_column(nullable).convert(zero) is None
    assert mapper.map_column(required).convert(zero) == 0


@pytest.mark.parametrize(
    ("modes", "type_", "text", "kind", "value"),
    [
        (VitessModes(bigint_unsigned="long"), "bigint unsigned", b"18446744073709551615", "int64", -1),
        (VitessModes(bigint_unsigned="precise"), "bigint unsigned", b"5", "bytes", "BQ=="),
        (
            VitessModes(time_precision="connect"),
            "datetime(6)",
            b"2018-06-20 06:37:03.5",
            "int64",
            1529476623500,
        ),
        (VitessModes(time_precision="connect"), "timestamp", b"2020-02-13 01:02:03", "int64", 1581555723000),
        (
            VitessModes(time_precision="isostring"),
            "datetime(2)",
            b"2018-06-20 06:37:03.50",
            "string",
            "2018-06-20 06:37:03.50",
        ),
        (VitessModes(time_precision="isostring"), "time", b"-838:59:59", "string", "-838:59:59"),
        (VitessModes(time_precision="nanoseconds"), "time", b"00:00:01", "int64", 1_000_000_000),
        (VitessModes(binary="hex"), "varbinary(8)", b"\x01\xff", "string", "01ff"),
    ],
)
def test_handling_modes(modes, type_, text, kind, value):
    column = column_of("c", type_, nullable=True)
    mapping = VitessTypeMapper(modes).map_column(column)
    assert mapping.schema["type"] == kind
    assert mapping.convert(decoder(column)(text)) == value


def test_spatial_columns_stop_the_streamer_naming_the_column():
    with pytest.raises(UnsupportedTypeError, match="column location"):
        VitessTypeMapper(VitessModes()).map_column(column_of("location", "point", nullable=True))
