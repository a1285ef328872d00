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
