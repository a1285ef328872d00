"""The DDL parser keeps the schema timeline right, and refuses to guess."""

from __future__ import annotations

import pytest

from cdc_core.connectors.mysql.ddl import (
    UnknownTableError,
    UnparseableDdlError,
    apply_ddl,
    parse_create_table,
)
from cdc_core.schema.model import TableId

T = TableId("shop", "t")


def create(sql: str, db: str = "shop"):
    return parse_create_table(sql, db)


def names(tables, table=T):
    return [c.name for c in tables[table].columns]


def base():
    return {T: create("CREATE TABLE t (id INT PRIMARY KEY, c1 VARCHAR(10), c3 INT)")}


def test_add_column_in_the_middle_first_and_last():
    tables = apply_ddl("ALTER TABLE t ADD COLUMN c2 INT AFTER c1", "shop", base()).tables
    assert names(tables) == ["id", "c1", "c2", "c3"]
    tables = apply_ddl("ALTER TABLE shop.t ADD z INT FIRST, ADD COLUMN (a INT, b INT)", None, tables).tables
    assert names(tables) == ["z", "id", "c1", "c2", "c3", "a", "b"]


def test_input_map_is_never_mutated():
    tables = base()
    apply_ddl("ALTER TABLE t DROP COLUMN c3", "shop", tables)
    assert names(tables) == ["id", "c1", "c3"]


def test_change_renames_a_primary_key_column_and_drop_removes_it_from_the_key():
    tables = apply_ddl("ALTER TABLE t CHANGE COLUMN id pk BIGINT NOT NULL", "shop", base()).tables
    assert tables[T].primary_key == ("pk",) and tables[T].columns[0].type_name == "BIGINT"
    tables = apply_ddl("ALTER TABLE t DROP COLUMN pk", "shop", tables).tables
    assert tables[T].primary_key == () and names(tables) == ["c1", "c3"]


def test_modify_moves_and_retypes():
    tables = apply_ddl("ALTER TABLE t MODIFY c3 DECIMAL(12,4) UNSIGNED NOT NULL FIRST", "shop", base()).tables
    col = tables[T].columns[0]
    assert (col.name, col.type_name, col.length, col.scale, col.unsigned, col.nullable) == (
        "c3", "DECIMAL", 12, 4, True, False,
    )  # fmt: skip


def test_primary_key_changes():
    tables = apply_ddl("ALTER TABLE t DROP PRIMARY KEY, ADD PRIMARY KEY (c1, id)", "shop", base()).tables
    assert tables[T].primary_key == ("c1", "id")
    assert tables[T].column("c1").nullable is False


def test_convert_to_character_set():
    tables = apply_ddl(
        "ALTER TABLE t CONVERT TO CHARACTER SET utf8mb4 COLLATE utf8mb4_bin", "shop", base()
    ).tables
    assert tables[T].column("c1").charset == "utf8mb4" and tables[T].column("c3").charset is None
    assert tables[T].charset == "utf8mb4"


def test_rename_table_swap_is_sequential():
    tables = {
        TableId("d", "a"): create("CREATE TABLE a (x INT)", "d"),
        TableId("d", "b"): create("CREATE TABLE b (y INT)", "d"),
    }
    out = apply_ddl("RENAME TABLE a TO tmp, b TO a, tmp TO b", "d", tables)
    assert out.kind == "rename_table"
    assert names(out.tables, TableId("d", "a")) == ["y"] and names(out.tables, TableId("d", "b")) == ["x"]
    assert TableId("d", "tmp") not in out.tables


def test_sequences_and_views_are_not_tables_of_the_history():
    """MariaDB creates a sequence with CREATE SEQUENCE or CREATE TABLE ... SEQUENCE=1, and
    RENAME TABLE renames views and sequences too: none is a table whose rows the history
    describes (a rename of one stopped the streamer, saying the history was incomplete)."""
    tables = base()
    sequence = (
        "CREATE TABLE s (next_not_cached_value bigint(21) NOT NULL, minimum_value bigint(21) NOT NULL) "
        "ENGINE=InnoDB SEQUENCE=1"
    )
    for statement in (sequence, "CREATE OR REPLACE SEQUENCE s2 START WITH 5", "ALTER SEQUENCE s2 RESTART 7"):
        out = apply_ddl(statement, "shop", tables)
        assert out.kind == "ignored" and out.tables is tables
    out = apply_ddl("RENAME TABLE s2 TO s3, t TO t2, some_view TO other_view", "shop", tables)
    assert out.affected == (T, TableId("shop", "t2")) and list(out.tables) == [TableId("shop", "t2")]
    named = apply_ddl("CREATE TABLE q (sequence INT, CHECK (sequence = 1)) COMMENT 'sequence'", "shop", {})
    assert names(named.tables, TableId("shop", "q")) == ["sequence"]


def test_partition_operations_that_move_rows_are_marked_and_convert_makes_or_takes_a_table():
    tables = {
        **base(),
        TableId("shop", "x"): create("CREATE TABLE x (id INT PRIMARY KEY, c1 VARCHAR(10), c3 INT)"),
    }
    out = apply_ddl("ALTER TABLE t TRUNCATE PARTITION p0, p1", "shop", tables)
    assert out.rows_below_binlog == "TRUNCATE PARTITION" and out.tables == tables
    out = apply_ddl("ALTER TABLE t ALGORITHM=INPLACE, LOCK=NONE, DROP PARTITION p0", "shop", tables)
    assert out.rows_below_binlog == "DROP PARTITION"
    out = apply_ddl("ALTER TABLE t EXCHANGE PARTITION p1 WITH TABLE x WITHOUT VALIDATION", "shop", tables)
    assert out.rows_below_binlog == "EXCHANGE PARTITION" and out.affected == (T, TableId("shop", "x"))
    out = apply_ddl("ALTER TABLE t CONVERT PARTITION p2 TO TABLE archive.q", "shop", tables)
    assert names(out.tables, TableId("archive", "q")) == names(tables) and T in out.tables
    out = apply_ddl("ALTER TABLE t CONVERT TABLE x TO PARTITION p3 VALUES LESS THAN (10)", "shop", tables)
    assert out.rows_below_binlog.startswith("CONVERT TABLE") and list(out.tables) == [T]
    for statement in (
        "ALTER TABLE t ADD PARTITION (PARTITION p9 VALUES LESS THAN (9))",
        "ALTER TABLE t ADD x INT",
    ):
        assert apply_ddl(statement, "shop", tables).rows_below_binlog is None


def test_alter_rename_to_another_database():
    out = apply_ddl("ALTER TABLE t RENAME TO archive.t_old", "shop", base())
    assert TableId("archive", "t_old") in out.tables and T not in out.tables
    assert set(out.affected) == {T, TableId("archive", "t_old")}


def test_executable_comments_quoted_identifiers_and_enum_values():
    schema = create(
        "CREATE TABLE `we``ird name` (`a b` INT NOT NULL, "
        "e ENUM('it''s','a,b','x\\\\y') DEFAULT 'a,b' /*!50100 COMMENT 'c' */, PRIMARY KEY (`a b`)) "
        "/*!40101 DEFAULT CHARSET=latin1 */"
    )
    assert schema.id == TableId("shop", "we`ird name")
    assert schema.primary_key == ("a b",)
    e = schema.column("e")
    assert e.enum_values == ("it's", "a,b", "x\\y") and e.default == "a,b" and e.charset == "latin1"


def test_defaults():
    schema = create(
        "CREATE TABLE d (a INT DEFAULT -1, b VARCHAR(5) DEFAULT _utf8mb4'x''y', c TIMESTAMP(3) NOT NULL DEFAULT "
        "CURRENT_TIMESTAMP(3) ON UPDATE CURRENT_TIMESTAMP(3), d INT DEFAULT NULL, e INT, f JSON DEFAULT (JSON_ARRAY()), "
        "g BIT(3) DEFAULT b'101')"
    )
    got = {c.name: (c.has_default, c.default, c.default_expression) for c in schema.columns}
    assert got == {
        "a": (True, "-1", False),
        "b": (True, "x'y", False),
        "c": (True, "CURRENT_TIMESTAMP(3)", True),
        "d": (True, None, False),
        "e": (False, None, False),
        "f": (True, "JSON_ARRAY()", True),
        "g": (True, "b'101'", False),
    }
    assert schema.column("c").length == 3


MARIADB_SHOW_CREATE = """CREATE TABLE `orders` (
  `id` bigint(20) unsigned NOT NULL AUTO_INCREMENT,
  `customer_id` int(11) NOT NULL,
  `status` enum('new','paid') NOT NULL DEFAULT 'new',
  `total` decimal(12,2) NOT NULL,
  `note` varchar(40) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin DEFAULT NULL,
  `doc` longtext CHARACTER SET utf8mb4 COLLATE utf8mb4_bin DEFAULT NULL CHECK (json_valid(`doc`)),
  `placed_at` timestamp(3) NOT NULL DEFAULT current_timestamp(3),
  `flag` tinyint(1) DEFAULT 0,
  PRIMARY KEY (`id`),
  UNIQUE KEY `uq` (`customer_id`,`placed_at`),
  KEY `k_status` (`status`),
  CONSTRAINT `fk_c` FOREIGN KEY (`customer_id`) REFERENCES `customers` (`id`) ON DELETE CASCADE
) ENGINE=InnoDB AUTO_INCREMENT=7 DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_general_ci"""


def test_mariadb_show_create_table_output():
    schema = create(MARIADB_SHOW_CREATE)
    got = [
        (c.name, c.type_name, c.length, c.scale, c.unsigned, c.nullable, c.charset) for c in schema.columns
    ]
    assert got == [
        ("id", "BIGINT", None, None, True, False, None),
        ("customer_id", "INT", None, None, False, False, None),
        ("status", "ENUM", None, None, False, False, "utf8mb4"),
        ("total", "DECIMAL", 12, 2, False, False, None),
        ("note", "VARCHAR", 40, None, False, True, "utf8mb4"),
        ("doc", "JSON", None, None, False, True, None),
        ("placed_at", "TIMESTAMP", 3, None, False, False, None),
        ("flag", "TINYINT", None, None, False, True, None),
    ]
    assert schema.primary_key == ("id",) and schema.column("id").auto_increment
    assert (schema.charset, schema.collation) == ("utf8mb4", "utf8mb4_general_ci")


def test_ddl_and_show_create_agree_after_normalisation():
    from_ddl = create(
        "CREATE TABLE x (id INTEGER PRIMARY KEY, b BOOLEAN, n NUMERIC, d DOUBLE PRECISION, t DATETIME(0))"
    )
    from_server = create(
        "CREATE TABLE `x` (`id` int(11) NOT NULL, `b` tinyint(1) DEFAULT NULL, `n` decimal(10,0) DEFAULT NULL, "
        "`d` double DEFAULT NULL, `t` datetime DEFAULT NULL, PRIMARY KEY (`id`))"
    )
    simple = [(c.name, c.type_name, c.length, c.scale, c.nullable) for c in from_ddl.columns]
    assert simple == [(c.name, c.type_name, c.length, c.scale, c.nullable) for c in from_server.columns]


@pytest.mark.parametrize(
    "statement",
    [
        "BEGIN",
        "COMMIT",
        "SET NAMES utf8mb4",
        "/*!40101 SET character_set_client = utf8 */",
        "GRANT SELECT ON *.* TO 'u'@'%'",
        "CREATE USER 'u'@'%' IDENTIFIED BY 'p'",
        "CREATE OR REPLACE VIEW v AS SELECT 1",
        "CREATE DEFINER=`root`@`localhost` PROCEDURE p() BEGIN SELECT 1; END",
        "DROP TRIGGER IF EXISTS trg",
        "ALTER USER 'u'@'%' IDENTIFIED BY 'q'",
        "INSERT INTO t VALUES (1)",
        "FLUSH PRIVILEGES",
        "ANALYZE TABLE t",
        "-- just a comment",
        "",
    ],
)
def test_statements_that_cannot_change_tables_are_ignored(statement):
    tables = base()
    out = apply_ddl(statement, "shop", tables)
    assert out.kind == "ignored" and out.tables is tables


def test_table_level_kinds():
    tables = base()
    assert apply_ddl("TRUNCATE TABLE t", "shop", tables).kind == "truncate_table"
    assert apply_ddl("CREATE INDEX i ON t (c1)", "shop", tables).affected == (T,)
    assert apply_ddl("DROP INDEX i ON t", "shop", tables).kind == "drop_index"
    out = apply_ddl("DROP DATABASE shop", None, tables)
    assert out.kind == "drop_database" and out.tables == {}
    out = apply_ddl("DROP TABLE IF EXISTS t, missing", "shop", tables)
    assert out.tables == {}
    like = apply_ddl("CREATE TABLE t2 LIKE t", "shop", tables).tables
    assert names(like, TableId("shop", "t2")) == ["id", "c1", "c3"]


def test_mariadb_if_exists_variants():
    tables = base()
    assert apply_ddl("ALTER TABLE t ADD COLUMN IF NOT EXISTS c1 INT", "shop", tables).tables[T] == tables[T]
    assert apply_ddl("ALTER TABLE t DROP COLUMN IF EXISTS nope", "shop", tables).tables[T] == tables[T]


def test_mariadb_system_versioning_clauses_are_read():
    """Explicit period columns are generated columns; adding or dropping versioning
    changes no column the history knows (the streamer refuses captured versioned tables)."""
    hist = create(
        "CREATE TABLE h (id INT PRIMARY KEY, s TIMESTAMP(6) GENERATED ALWAYS AS ROW START, "
        "e TIMESTAMP(6) GENERATED ALWAYS AS ROW END, PERIOD FOR SYSTEM_TIME(s, e)) WITH SYSTEM VERSIONING"
    )
    assert [(c.name, c.generated) for c in hist.columns] == [("id", False), ("s", True), ("e", True)]
    tables = base()
    for statement in ("ALTER TABLE t ADD SYSTEM VERSIONING", "ALTER TABLE t DROP SYSTEM VERSIONING"):
        assert apply_ddl(statement, "shop", tables).tables[T] == tables[T]


@pytest.mark.parametrize(
    ("statement", "error", "message"),
    [
        ("ALTER TABLE t FROBNICATE x", UnparseableDdlError, "unsupported ALTER TABLE clause"),
        ("ALTER TABLE missing ADD x INT", UnknownTableError, "missing is not in the schema history"),
        ("ALTER TABLE t ADD x INT AFTER nope", UnknownTableError, "nope"),
        ("ALTER TABLE t DROP COLUMN nope", UnknownTableError, "nope"),
        ("CREATE TABLE c AS SELECT * FROM t", UnparseableDdlError, "CREATE TABLE ... SELECT"),
        ("CREATE TABLE w (x FANCYTYPE)", UnparseableDdlError, "unknown data type FANCYTYPE"),
        ("CREATE TABLE w (x INT WOBBLY)", UnparseableDdlError, "unexpected attribute"),
        ("FROBNICATE TABLE t", UnparseableDdlError, "unknown statement"),
    ],
)
def test_what_cannot_be_parsed_is_an_error_naming_the_statement(statement, error, message):
    with pytest.raises(error, match=message):
        apply_ddl(statement, "shop", base())


def test_unqualified_name_without_default_database():
    with pytest.raises(UnparseableDdlError, match="no default database"):
        apply_ddl("ALTER TABLE t ADD x INT", None, base())


def test_foreign_keys_that_change_rows_below_the_binlog_are_found_in_table_ddl():
    from cdc_core.connectors.mysql.server import cascades

    shown = (
        "CREATE TABLE `child` (\n  `id` int(11) NOT NULL,\n  `pid` int(11) DEFAULT NULL,\n"
        "  CONSTRAINT `fk_a` FOREIGN KEY (`pid`) REFERENCES `parent` (`id`) ON DELETE CASCADE ON UPDATE SET NULL,\n"
        "  CONSTRAINT `fk_b` FOREIGN KEY (`pid`) REFERENCES `parent` (`id`),\n"
        "  CONSTRAINT `fk_c` FOREIGN KEY (`pid`) REFERENCES `parent` (`id`) ON DELETE RESTRICT\n) ENGINE=InnoDB"
    )
    assert cascades(shown) == ["ON DELETE CASCADE ON UPDATE SET NULL"]
    assert cascades("alter table c add foreign key (p) references parent(id) on update  set default") == [
        "ON UPDATE SET DEFAULT"
    ]
    assert cascades("ALTER TABLE c ADD FOREIGN KEY (p) REFERENCES parent (id) ON DELETE NO ACTION") == []


def test_a_create_reports_the_table_it_replaces():
    tables = base()
    replaced = apply_ddl("CREATE OR REPLACE TABLE t (id INT PRIMARY KEY)", "shop", tables)
    assert replaced.replaced == (T,) and names(replaced.tables) == ["id"]
    assert apply_ddl("CREATE TABLE IF NOT EXISTS t (id INT PRIMARY KEY)", "shop", tables).replaced == ()
    assert apply_ddl("CREATE TABLE fresh (id INT PRIMARY KEY)", "shop", tables).replaced == ()
