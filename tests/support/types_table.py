"""One row of (almost) every MySQL column type, for the type-mapping tests: a streamed row
and a snapshot read of it must give the same event values."""

TYPES_DDL = """CREATE TABLE t (id INT PRIMARY KEY, tu TINYINT UNSIGNED, iu INT UNSIGNED, bu BIGINT UNSIGNED,
    f FLOAT, d DOUBLE, dec1 DECIMAL(10,2), dt DATETIME, dt6 DATETIME(6), ts TIMESTAMP(3) NULL,
    da DATE, tm TIME(6), y YEAR, j JSON, e ENUM('a','b c'), s SET('x','y','z'),
    c CHAR(5) CHARACTER SET utf8mb4, vc VARCHAR(20) CHARACTER SET latin1, tx TEXT CHARACTER SET utf8mb4,
    vb VARBINARY(10), bl BLOB, bit1 BIT(1), bit10 BIT(10), nn INT)"""

TYPES_ROW = """INSERT INTO t VALUES (1, 250, 4000000000, 18446744073709551615, 1.1, 2.2, 12345678.91,
    '2024-02-29 23:59:59', '2024-02-29 23:59:59.123456', '2024-01-02 03:04:05.678', '2024-02-29',
    '-12:34:56.5', 2024, '{"k": [1, 2.5, "é"]}', 'b c', 'x,z', 'hé', 'café', 'ünï😀', x'cafe', x'00ff',
    b'1', b'1000000001', NULL)"""


# The all-types table with many rows: every type at its edges, zero dates, a row of NULLs.
# Its columns are those Spark's JDBC reader reads exactly; WIDE_COLUMNS (a DECIMAL wider
# than 38 digits, spatial types) make the Spark chunk job read a table with Python.
COLUMNS = {
    "ti": "TINYINT",
    "tu": "TINYINT UNSIGNED",
    "si": "SMALLINT",
    "su": "SMALLINT UNSIGNED",
    "mi": "MEDIUMINT",
    "mu": "MEDIUMINT UNSIGNED",
    "i": "INT",
    "iu": "INT UNSIGNED",
    "bi": "BIGINT",
    "bu": "BIGINT UNSIGNED",
    "bo": "BOOLEAN",
    "f": "FLOAT",
    "d": "DOUBLE",
    "dec1": "DECIMAL(10,2)",
    "dec38": "DECIMAL(38,10)",
    "dt": "DATETIME",
    "dt3": "DATETIME(3)",
    "dt6": "DATETIME(6)",
    "ts": "TIMESTAMP NULL",
    "ts3": "TIMESTAMP(3) NULL",
    "ts6": "TIMESTAMP(6) NULL",
    "da": "DATE",
    "tm": "TIME",
    "tm3": "TIME(3)",
    "tm6": "TIME(6)",
    "y": "YEAR",
    "j": "JSON",
    "e": "ENUM('a','b c')",
    "s": "SET('x','y','z')",
    "c": "CHAR(5) CHARACTER SET utf8mb4",
    "vc": "VARCHAR(20) CHARACTER SET latin1",
    "tx": "TEXT CHARACTER SET utf8mb4",
    "bn": "BINARY(4)",
    "vb": "VARBINARY(10)",
    "bl": "BLOB",
    "bit1": "BIT(1)",
    "bit10": "BIT(10)",
    "bit64": "BIT(64)",
    "dz": "DATETIME NOT NULL DEFAULT '2001-02-03 04:05:06'",
}
WIDE_COLUMNS = {"dw": "DECIMAL(65,30)", "g": "GEOMETRY", "pt": "POINT"}

_MAX64 = "b'" + "1" * 64 + "'"
# Each row's values as SQL (a spatial value is an expression); a column left out is NULL
# (or its default).
ROWS: list[dict[str, str]] = [
    {  # ordinary values (those of TYPES_ROW)
        "ti": "-5", "tu": "250", "si": "-300", "su": "60000", "mi": "-70000", "mu": "70000", "i": "-7",
        "iu": "4000000000", "bi": "-8", "bu": "18446744073709551615", "bo": "1", "f": "1.1", "d": "2.2",
        "dec1": "12345678.91", "dec38": "-1234.5", "dt": "'2024-02-29 23:59:59'",
        "dt3": "'2024-02-29 23:59:59.5'", "dt6": "'2024-02-29 23:59:59.123456'",
        "ts": "'2024-01-02 03:04:05'", "ts3": "'2024-01-02 03:04:05.678'", "ts6": "'2024-01-02 03:04:05.000001'",
        "da": "'2024-02-29'", "tm": "'12:34:56'", "tm3": "'-12:34:56.5'", "tm6": "'-12:34:56.5'", "y": "2024",
        "j": """'{"k": [1, 2.5, "é"]}'""", "e": "'b c'", "s": "'x,z'", "c": "'hé'", "vc": "'café'",
        "tx": "'ünï😀'", "bn": "x'cafe'", "vb": "x'cafe'", "bl": "x'00ff'", "bit1": "b'1'", "bit10": "b'1000000001'",
        "bit64": "b'101'", "dw": "'-3.5'", "g": "ST_GeomFromText('POINT(1 2)')", "pt": "POINT(3, 4)",
    },
    {  # minimums and empties
        "ti": "-128", "tu": "0", "si": "-32768", "su": "0", "mi": "-8388608", "mu": "0", "i": "-2147483648",
        "iu": "0", "bi": "-9223372036854775808", "bu": "0", "bo": "0", "f": "-3.40282e38",
        "d": "-1.7976931348623157e308", "dec1": "-99999999.99", "dec38": "-" + "9" * 28 + "." + "9" * 10,
        "dt": "'1000-01-01 00:00:00'", "dt3": "'1000-01-01 00:00:00.001'", "dt6": "'1000-01-01 00:00:00.000001'",
        "ts": "'1970-01-01 00:00:01'", "ts3": "'1970-01-01 00:00:01.001'", "ts6": "'1970-01-01 00:00:01.000001'",
        "da": "'1000-01-01'", "tm": "'-838:59:59'", "tm3": "'-838:59:59.000'", "tm6": "'-838:59:59.000000'",
        "y": "1901", "j": "'[]'", "e": "'a'", "s": "''", "c": "''", "vc": "''", "tx": "''", "bn": "x''", "vb": "x''",
        "bl": "x''", "bit1": "b'0'", "bit10": "b'0'", "bit64": "b'0'", "dz": "'1000-01-01 00:00:00'",
        "dw": "'-" + "9" * 35 + "." + "9" * 30 + "'", "g": "ST_GeomFromText('LINESTRING(0 0, -1.5 2.25)', 4326)",
        "pt": "POINT(-1e308, 1e-300)",
    },
    {  # maximums
        "ti": "127", "tu": "255", "si": "32767", "su": "65535", "mi": "8388607", "mu": "16777215",
        "i": "2147483647", "iu": "4294967295", "bi": "9223372036854775807", "bu": "9223372036854775808",
        "bo": "127", "f": "3.40282e38", "d": "1.7976931348623157e308", "dec1": "99999999.99",
        "dec38": "9" * 28 + "." + "9" * 10, "dt": "'9999-12-31 23:59:59'", "dt3": "'9999-12-31 23:59:59.999'",
        "dt6": "'9999-12-31 23:59:59.999999'", "ts": "'2038-01-19 03:14:07'", "ts3": "'2038-01-19 03:14:07.999'",
        "ts6": "'2038-01-19 03:14:07.999999'", "da": "'9999-12-31'", "tm": "'838:59:59'",
        "tm3": "'838:59:59.999'", "tm6": "'838:59:59.999999'", "y": "2155",
        "j": """'{"big": 123456789012345678901234567890, "n": null, "s": "\\\\u00e9\\\\"q"}'""", "e": "'b c'",
        "s": "'x,y,z'", "c": "'😀😀😀😀😀'", "vc": "'€ÿŒ'", "tx": "REPEAT('ünï😀', 5000)", "bn": "x'ffffffff'",
        "vb": "x'ffffffffffffffffffff'", "bl": "REPEAT(x'00ff80', 20000)", "bit1": "b'1'",
        "bit10": "b'1111111111'", "bit64": _MAX64, "dz": "'9999-12-31 23:59:59'",
        "dw": "'" + "9" * 35 + "." + "9" * 30 + "'",
        "g": "ST_GeomFromText('POLYGON((0 0, 10 0, 10 10, 0 10, 0 0), (1 1, 2 1, 2 2, 1 1))', 3857)",
        "pt": "POINT(1.7976931348623157e308, -0.5)",
    },
    {  # around the epoch and zero: negative fractions, negative zero, float precision
        "ti": "0", "bi": "-1", "bu": "9223372036854775807", "f": "-0e0", "d": "-0e0", "dec1": "0",
        "dec38": "0.0000000001", "dt": "'1969-12-31 23:59:59'", "dt3": "'1969-12-31 23:59:59.999'",
        "dt6": "'1969-12-31 23:59:59.999999'", "ts": "'1970-01-01 00:00:01'", "ts3": "'2000-01-01 00:00:00'",
        "ts6": "'2000-01-01 00:00:00.5'", "da": "'1969-12-31'", "tm": "'00:00:00'", "tm3": "'-00:00:00.001'",
        "tm6": "'-00:00:00.000001'", "y": "0", "j": "'null'", "s": "'y'", "c": "'ab  '", "vc": "'trail  '",
        "tx": "' '", "bn": "x'00'", "vb": "x'00'", "bl": "x'00'", "bit1": "b'0'", "bit10": "b'1'",
        "bit64": "b'1" + "0" * 63 + "'", "dz": "'1970-01-01 00:00:00'", "dw": "'0.000000000000000000000000000001'",
        "g": "ST_GeomFromText('GEOMETRYCOLLECTION EMPTY')", "pt": "POINT(0, -0)",
    },
    {  # float and double precision
        "f": "1.234567", "d": "0.30000000000000004", "dec1": "-0.01", "tm": "'-00:00:01'", "tm3": "'00:00:00.5'",
        "tm6": "'23:59:59.999999'", "dt6": "'2038-01-19 03:14:08.000001'", "j": "'\"text\"'",
    },
    {"f": "1.175494e-38", "d": "2.2250738585072014e-308", "j": "'12.50'"},
    {"f": "16777217", "d": "9007199254740993"},
    {  # zero dates (allowed unless sql_mode has NO_ZERO_DATE)
        "dt": "'0000-00-00 00:00:00'", "dt3": "'0000-00-00 00:00:00.000'", "dt6": "'0000-00-00 00:00:00'",
        "ts": "'0000-00-00 00:00:00'", "ts3": "'0000-00-00 00:00:00'", "ts6": "'0000-00-00 00:00:00'",
        "da": "'0000-00-00'", "dz": "'0000-00-00 00:00:00'", "y": "0000",
    },
    {},  # NULL in every nullable column
]  # fmt: skip


def all_types_ddl(table: str, wide: bool = False) -> str:
    columns = {**COLUMNS, **(WIDE_COLUMNS if wide else {})}
    body = ", ".join(f"`{name}` {kind}" for name, kind in columns.items())
    return f"CREATE TABLE `{table}` (id INT PRIMARY KEY, {body})"


def insert_all_types(cur, table: str, wide: bool = False) -> None:
    """ROWS into `table` (ids from 1), in a UTC session (TIMESTAMP values are UTC)."""
    columns = [*COLUMNS, *(WIDE_COLUMNS if wide else {})]
    cur.execute("SET time_zone = '+00:00'")
    for number, row in enumerate(ROWS, start=1):
        names = ["id", *(c for c in columns if c in row)]
        values = [str(number), *(row[c] for c in columns if c in row)]
        cur.execute(
            f"INSERT INTO `{table}` ({', '.join(f'`{n}`' for n in names)}) VALUES ({', '.join(values)})"
        )
