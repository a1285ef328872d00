import logging
import time

from tests.support.streamer import admin, payloads, running_in_process, write_connector


def test_probe(tmp_path, mariadb_admin_params, scratch_db, spark, caplog):
    db = admin(mariadb_admin_params, scratch_db)
    ddl = [
        "CREATE TABLE minimal (id INT PRIMARY KEY, a INT, b TEXT)",
        "CREATE TABLE noblob (id INT PRIMARY KEY, a INT, b TEXT)",
        "CREATE TABLE stmt (id INT PRIMARY KEY, a INT)",
        "CREATE TABLE mixed (id INT PRIMARY KEY, a INT, u VARCHAR(40))",
        "CREATE TABLE versioned (id INT PRIMARY KEY, a INT)",
        "CREATE TABLE invis (id INT PRIMARY KEY, a INT, h INT INVISIBLE DEFAULT 5)",
        "CREATE TABLE parent (id INT PRIMARY KEY, a INT) ENGINE=InnoDB",
        "CREATE TABLE child (id INT PRIMARY KEY, pid INT, FOREIGN KEY (pid) REFERENCES parent(id) ON DELETE CASCADE ON UPDATE CASCADE) ENGINE=InnoDB",
        "CREATE TABLE trig_src (id INT PRIMARY KEY, a INT)",
        "CREATE TABLE trig_dst (id INT PRIMARY KEY, a INT)",
        "CREATE TRIGGER tg AFTER INSERT ON trig_src FOR EACH ROW INSERT INTO trig_dst VALUES (NEW.id, NEW.a * 10)",
        "CREATE TABLE gen (id INT PRIMARY KEY, a INT, v INT AS (a * 2) VIRTUAL, s INT AS (a * 3) PERSISTENT)",
    ]
    with db.cursor() as cur:
        for d in ddl:
            cur.execute(d)
    c = write_connector(tmp_path, scratch_db, {"database.server.id": 6412})
    with caplog.at_level(logging.WARNING), running_in_process(c):
        with db.cursor() as cur:
            cur.execute("INSERT INTO minimal VALUES (1, 1, 'one'), (2, 2, 'two')")
            cur.execute("INSERT INTO noblob VALUES (1, 1, 'one'), (2, 2, 'two')")
            cur.execute("INSERT INTO stmt VALUES (1, 1)")
            cur.execute("INSERT INTO mixed VALUES (1, 1, 'x')")
        w = admin(mariadb_admin_params, scratch_db)
        with w.cursor() as cur:
            cur.execute("SET SESSION binlog_row_image=MINIMAL")
            cur.execute("UPDATE minimal SET a = 10 WHERE id = 1")
            cur.execute("DELETE FROM minimal WHERE id = 2")
            cur.execute("INSERT INTO minimal (id, a) VALUES (3, 3)")
            cur.execute("SET SESSION binlog_row_image=NOBLOB")
            cur.execute("UPDATE noblob SET a = 10 WHERE id = 1")
            cur.execute("SET SESSION binlog_row_image=FULL")
            cur.execute("SET SESSION binlog_format=STATEMENT")
            cur.execute("INSERT INTO stmt VALUES (2, 2)")
            cur.execute("UPDATE stmt SET a = 5")
            cur.execute("SET SESSION binlog_format=MIXED")
            cur.execute("INSERT INTO mixed VALUES (2, 2, 'y')")
            cur.execute("INSERT INTO mixed VALUES (3, 3, UUID())")
            cur.execute("SET SESSION binlog_format=ROW")
            cur.execute("INSERT INTO versioned VALUES (1, 1), (2, 2)")
            cur.execute("UPDATE versioned SET a = 11 WHERE id = 1")
            cur.execute("DELETE FROM versioned WHERE id = 2")
            cur.execute("INSERT INTO invis (id, a, h) VALUES (1, 1, 9)")
            cur.execute("INSERT INTO invis (id, a) VALUES (2, 2)")
            cur.execute("INSERT INTO parent VALUES (1, 1), (2, 2)")
            cur.execute("INSERT INTO child VALUES (10, 1), (20, 2)")
            cur.execute("DELETE FROM parent WHERE id = 1")
            cur.execute("UPDATE parent SET id = 3 WHERE id = 2")
            cur.execute("INSERT INTO trig_src VALUES (1, 1)")
            cur.execute("INSERT INTO gen (id, a) VALUES (1, 1)")
            cur.execute("UPDATE gen SET a = 5")
        time.sleep(5)
    print("LOG", caplog.text[-4000:])
    from spark_jobs.delta_merge import run_local
    from tests.support.lakehouse import delta_rows, source_rows

    try:
        run_local(spark, c.config(), str(tmp_path / "delta"), str(tmp_path / "ck"))
    except Exception as e:
        print("MERGE FAILED", str(e)[:2000])
    for t in [
        "minimal",
        "noblob",
        "stmt",
        "mixed",
        "versioned",
        "invis",
        "parent",
        "child",
        "trig_src",
        "trig_dst",
        "gen",
    ]:
        cols, src = source_rows(mariadb_admin_params, scratch_db, t)
        try:
            d = delta_rows(spark, str(tmp_path / "delta"), scratch_db, t, cols)
        except Exception as e:
            d = f"ERR {str(e)[:200]}"
        print("TABLE", t, "OK" if d == src else f"DIFF src={src} delta={d}")
        print(
            "  events",
            [(p["op"], p["before"], p["after"]) for p in payloads(c, f"{c.prefix}.{scratch_db}.{t}")][:8],
        )
