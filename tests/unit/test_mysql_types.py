"""Binlog values → Debezium's MySQL representation, per handling mode."""

from __future__ import annotations

import base64
import datetime as dt
import decimal
import struct

import pytest

from cdc_core.connectors.mysql.types import TypeModes, map_column
from cdc_core.errors import UnsupportedTypeError
from cdc_core.schema.model import Column

DEFAULT = TypeModes()


def conv(column: Column, value, modes: TypeModes = DEFAULT):
    return map_column(column, modes).convert(value)


def schema(column: Column, modes: TypeModes = DEFAULT):
    return map_column(column, modes).schema


@pytest.mark.parametrize(
    ("column", "value", "expected", "connect_type"),
    [
        (Column("a", "TINYINT"), -5, -5, "int16"),
        (Column("a", "TINYINT", unsigned=True), 250, 250, "int16"),
        (Column("a", "SMALLINT", unsigned=True), 65000, 65000, "int32"),
        (Column("a", "INT"), -7, -7, "int32"),
        (Column("a", "INT", unsigned=True), 4000000000, 4000000000, "int64"),
        (Column("a", "BIGINT"), -(2**63), -(2**63), "int64"),
        (Column("a", "BIGINT", unsigned=True), 2**64 - 1, -1, "int64"),  # long mode wraps, as Debezium
        (Column("a", "FLOAT"), 1.100000023841858, 1.1, "float"),
        (Column("a", "DOUBLE"), 2.2, 2.2, "double"),
        (Column("a", "YEAR"), 2024, 2024, "int32"),
        (Column("a", "BIT", length=1), "1", True, "boolean"),
        (Column("a", "VARCHAR", length=20, charset="utf8mb4"), "ünï😀", "ünï😀", "string"),
        (Column("a", "VARCHAR", length=20, charset="latin1"), b"caf\xe9", "café", "string"),
        (Column("a", "ENUM", enum_values=("a", "b c", "d'q")), "d'q", "d'q", "string"),
        (Column("a", "SET", enum_values=("x", "y", "z")), {"z", "x"}, "x,z", "string"),
        (Column("a", "JSON"), '{"k": [1, 2.5]}', '{"k": [1, 2.5]}', "string"),
    ],
)
def test_basic_types(column, value, expected, connect_type):
    assert conv(column, value) == expected
    assert schema(column)["type"] == connect_type


def test_decimal_modes():
    col = Column("price", "DECIMAL", length=10, scale=2)
    value = decimal.Decimal("12345678.91")
    encoded = conv(col, value)
    unscaled = int.from_bytes(base64.b64decode(encoded), "big", signed=True)
    assert unscaled == 1234567891
    assert schema(col)["parameters"] == {"scale": "2", "connect.decimal.precision": "10"}
    assert int.from_bytes(base64.b64decode(conv(col, decimal.Decimal("-0.01"))), "big", signed=True) == -1
    assert conv(col, decimal.Decimal("-1E-10"), TypeModes(decimal="string")) == "-0.0000000001"
    assert conv(col, value, TypeModes(decimal="double")) == pytest.approx(12345678.91)


@pytest.mark.parametrize(
    ("precision", "scale", "text"),
    [(38, 10, "9" * 28 + "." + "9" * 10), (38, 0, "-" + "9" * 38), (65, 30, "-" + "9" * 35 + "." + "9" * 30)],
)
def test_decimals_wider_than_28_digits_stay_exact(precision, scale, text):
    """Python's default decimal context rounds to 28 digits: 38 nines became 10^38."""
    encoded = conv(Column("d", "DECIMAL", length=precision, scale=scale), decimal.Decimal(text))
    unscaled = int.from_bytes(base64.b64decode(encoded), "big", signed=True)
    assert unscaled == int(text.replace(".", ""))


@pytest.mark.parametrize(
    ("stored", "event"),
    [
        (1.100000023841858, 1.1),
        (16777216.0, 16777216.0),  # 7 digits made it 16777220
        (1.2345670461654663, 1.234567),
        (0.10000000149011612, 0.1),
        (3.4028234663852886e38, 3.4028235e38),
        (1.1754943508222875e-38, 1.1754944e-38),
        (1.401298464324817e-45, 1e-45),
        (-0.0, -0.0),
    ],
)
def test_a_float_is_its_shortest_decimal_that_reads_back_as_the_stored_float(stored, event):
    value = conv(Column("f", "FLOAT"), stored)
    assert value == event and repr(value) == repr(event)
    assert struct.unpack("<f", struct.pack("<f", value)) == (stored,)


def test_year_zero_which_the_binlog_decoder_gives_as_1900():
    assert conv(Column("y", "YEAR"), 1900) == 0  # python-mysql-replication's YEAR 0000
    assert conv(Column("y", "YEAR"), 0) == 0  # the snapshot readers'
    assert conv(Column("y", "YEAR"), 1901) == 1901


def test_bigint_unsigned_precise():
    col = Column("n", "BIGINT", unsigned=True)
    encoded = conv(col, 2**64 - 1, TypeModes(bigint_unsigned="precise"))
    assert int.from_bytes(base64.b64decode(encoded), "big", signed=True) == 2**64 - 1


def test_temporal_adaptive_time_microseconds():
    assert conv(Column("d", "DATE"), dt.date(2024, 2, 29)) == 19782
    assert schema(Column("d", "DATE"))["name"] == "io.debezium.time.Date"
    assert conv(Column("t", "DATETIME"), dt.datetime(1970, 1, 1, 0, 0, 1)) == 1000
    assert schema(Column("t", "DATETIME", length=3))["name"] == "io.debezium.time.Timestamp"
    assert (
        conv(Column("t", "DATETIME", length=6), dt.datetime(2024, 2, 29, 23, 59, 59, 123456))
        == 1709251199123456
    )
    assert schema(Column("t", "DATETIME", length=6))["name"] == "io.debezium.time.MicroTimestamp"
    neg = dt.timedelta(days=-35, seconds=3600, microseconds=1)  # -838:59:59.999999
    assert conv(Column("t", "TIME", length=6), neg) == -3020399999999
    assert schema(Column("t", "TIME"))["name"] == "io.debezium.time.MicroTime"
    ts = Column("ts", "TIMESTAMP", length=3)
    assert conv(ts, dt.datetime(2024, 1, 2, 3, 4, 5, 678000)) == "2024-01-02T03:04:05.678Z"
    assert conv(Column("ts", "TIMESTAMP"), dt.datetime(2024, 1, 2, 3, 4, 5)) == "2024-01-02T03:04:05Z"


def test_temporal_connect_mode_and_adaptive_time():
    connect = TypeModes(time_precision="connect")
    assert conv(Column("t", "DATETIME", length=6), dt.datetime(1970, 1, 1, 0, 0, 1, 999999), connect) == 1999
    assert schema(Column("t", "TIME"), connect)["name"] == "org.apache.kafka.connect.data.Time"
    adaptive = TypeModes(time_precision="adaptive")
    assert conv(Column("t", "TIME", length=3), dt.timedelta(seconds=1, microseconds=500000), adaptive) == 1500


def test_zero_date_in_a_not_null_column_becomes_the_epoch():
    assert conv(Column("d", "DATE", nullable=False), None) == 0
    assert conv(Column("d", "DATE"), None) is None


def test_the_zero_timestamp_the_binlog_decoder_gives_as_the_epoch_is_a_zero_date():
    """The binlog holds '0000-00-00 00:00:00' as 0 seconds, which the decoder gives as the
    epoch; the snapshot readers give None. No TIMESTAMP holds the epoch itself."""
    for fsp in (0, 6):
        assert conv(Column("ts", "TIMESTAMP", length=fsp), dt.datetime(1970, 1, 1)) is None
        assert conv(Column("ts", "TIMESTAMP", length=fsp), None) is None
        not_null = Column("ts", "TIMESTAMP", length=fsp, nullable=False)
        epoch = "1970-01-01T00:00:00" + (".000000" if fsp else "") + "Z"
        assert conv(not_null, dt.datetime(1970, 1, 1)) == conv(not_null, None) == epoch
    assert conv(Column("ts", "TIMESTAMP"), dt.datetime(1970, 1, 1, 0, 0, 1)) == "1970-01-01T00:00:01Z"


def test_binary_modes():
    col = Column("b", "VARBINARY", length=10)
    assert conv(col, b"\xca\xfe") == base64.b64encode(b"\xca\xfe").decode()
    assert schema(col)["type"] == "bytes"
    assert conv(col, b"\xca\xfe", TypeModes(binary="hex")) == "cafe"
    assert schema(col, TypeModes(binary="hex"))["type"] == "string"
    assert conv(col, b"\xfb\xff", TypeModes(binary="base64-url-safe")) == "-_8="
    padded = conv(Column("b", "BINARY", length=4), b"\x00\xff")
    assert base64.b64decode(padded) == b"\x00\xff\x00\x00"


def test_bits_geometry_uuid_inet():
    bits = conv(Column("b", "BIT", length=10), "1000000001")
    assert base64.b64decode(bits) == (513).to_bytes(2, "little")
    point = b"\x00\x00\x00\x00\x01\x01\x00\x00\x00" + struct.pack("<dd", 1.0, 2.0)
    geometry = conv(Column("g", "POINT"), point)
    assert (geometry["x"], geometry["y"], geometry["srid"]) == (1.0, 2.0, None)  # Debezium's Point
    assert base64.b64decode(geometry["wkb"])[:1] == b"\x01"
    assert schema(Column("g", "POINT"))["name"] == "io.debezium.data.geometry.Point"
    line = conv(Column("g", "LINESTRING"), b"\xe6\x10\x00\x00" + bytes.fromhex("010200000000000000"))
    assert line == {"wkb": "AQIAAAAAAAAA", "srid": 4326}
    raw_uuid = bytes.fromhex("123e4567e89b12d3a456426614174000")
    assert conv(Column("u", "UUID"), raw_uuid) == "123e4567-e89b-12d3-a456-426614174000"
    assert conv(Column("i", "INET6"), b"\x00" * 15 + b"\x01") == "::1"


def test_unknown_type_names_the_column_and_the_way_out():
    with pytest.raises(UnsupportedTypeError, match="column v: type VECTOR has no event mapping; exclude"):
        map_column(Column("v", "VECTOR"), DEFAULT)


def test_isostring_time_is_null_outside_a_day():
    modes = TypeModes(time_precision="isostring")
    assert (
        conv(Column("t", "TIME", length=3), dt.timedelta(hours=12, microseconds=250000), modes)
        == "12:00:00.25Z"
    )
    assert conv(Column("t", "TIME"), -dt.timedelta(seconds=1), modes) is None
    assert conv(Column("t", "TIME"), dt.timedelta(hours=24), modes) is None


def _defaulted(type_name: str, text: str, expression: bool = False, **kw) -> Column:
    return Column("c", type_name, default=text, has_default=True, default_expression=expression, **kw)


@pytest.mark.parametrize(
    ("column", "expected"),
    [
        (_defaulted("INT", "7", nullable=False), 7),
        (_defaulted("TINYINT", "TRUE", expression=True), 1),
        (_defaulted("FLOAT", "1.1"), 1.1),
        (_defaulted("DECIMAL", "12.5", length=10, scale=2), "BOI="),  # 12.50, unscaled 1250
        (_defaulted("BIT", "b'101'", length=5), "BQ=="),
        (_defaulted("BIT", "1", length=1), True),
        (_defaulted("DATE", "2020-02-29"), 18321),
        (_defaulted("DATE", "0000-00-00", nullable=False), 0),  # a zero date: the epoch when NOT NULL
        (_defaulted("DATE", "0000-00-00"), None),  # ... and no default when nullable
        (_defaulted("DATETIME", "2001-02-03 04:05:06.789", length=3), 981173106789),
        (_defaulted("DATETIME", "current_timestamp()", expression=True), 0),  # the current time: the epoch
        (
            _defaulted("TIMESTAMP", "CURRENT_TIMESTAMP", expression=True, nullable=False),
            "1970-01-01T00:00:00Z",
        ),
        (_defaulted("TIMESTAMP", "CURRENT_TIMESTAMP", expression=True), None),
        (_defaulted("TIMESTAMP", "2010-05-06 07:08:09"), "2010-05-06T07:08:09Z"),
        (_defaulted("TIME", "-01:02:03"), -3723000000),
        (_defaulted("SET", "x,y", enum_values=("x", "y")), "x,y"),
        (_defaulted("BINARY", "ab", length=4), "YWIAAA=="),  # padded like the column's values
        (_defaulted("VARCHAR", "", nullable=False), ""),
        (_defaulted("INT", "1 + 1", expression=True), None),  # expressions give no default
        (_defaulted("VARCHAR", "uuid()", expression=True), None),
        (_defaulted("JSON", "{}"), None),
        (Column("c", "INT", has_default=True, default=None), None),  # DEFAULT NULL
    ],
)
def test_a_column_default_is_in_its_field_schema_in_event_form(column, expected):
    field_schema = schema(column)
    assert field_schema.get("default") == expected
    assert list(field_schema)[-1] == "field"  # JsonConverter's key order


def test_a_not_null_column_gives_its_default_for_a_zero_date():
    column = _defaulted("DATETIME", "2001-02-03 04:05:06", nullable=False)
    assert conv(column, None) == 981173106000  # the decoder gives a zero date as None
    assert conv(column, dt.datetime(2020, 1, 1)) == 1577836800000


def test_each_server_has_debeziums_identity_for_it():
    """Debezium 3 has a MySQL and a MariaDB connector; the parity test runs the MariaDB one
    (no MySQL server can run here), this pins the MySQL side."""
    from cdc_core.connectors.mysql.source_info import source_schema

    assert source_schema("mysql")["name"] == "io.debezium.connector.mysql.Source"
    assert source_schema("mariadb")["name"] == "io.debezium.connector.mariadb.Source"
    assert schema(Column("j", "JSON"))["name"] == "io.debezium.data.Json"
    assert "name" not in schema(Column("j", "JSON"), TypeModes(flavor="mariadb"))  # MariaDB's JSON is text
