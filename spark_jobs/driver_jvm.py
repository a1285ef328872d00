"""The Spark driver JVM's options, and the class-data-sharing archive that shortens its start.

Every job here (a chunk job, a merge, a checksum, each test session) starts a driver JVM,
and on a 2-core machine that start costs more than the small job it runs: most of it is
loading, parsing and verifying the same ~17,000 classes of Spark, Scala and Delta. A
dynamic CDS archive (JDK 13+, `-XX:ArchiveClassesAtExit` once, `-XX:SharedArchiveFile`
after) keeps them parsed and verified on disk. Measured on the 2-core machine (2026-11-29):
a session's start took 15.5 s and 12.7 s without it, 10.0 s and 9.1 s with it; a session
that also wrote, merged and read a Delta table took 47.8 s and 42.1 s, and 36.9 s and
39.8 s.

An archive is valid only for the JVM that dumped it and for the driver's class path
(pyspark's jars), so it lives in `.local/jvm/` under a name derived from both: after a JDK
or pyspark change the old name no longer matches, no stale archive is ever passed, and
`make install` dumps a new one. Should the JVM still decline it, it runs without sharing as
before; `-Xlog:cds*=off` keeps its warning off the job's output.

    python -m spark_jobs.driver_jvm          # dump the archive unless it is current
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from spark_jobs.classpath import PROJECT_ROOT, SPARK_SCRATCH, spark_jars_dir

ARCHIVE_DIR = PROJECT_ROOT / ".local" / "jvm"
# Set to "off" to start drivers without the archive (to measure it, or to rule it out).
SWITCH = "TIDEMARK_SPARK_CDS"


def driver_java_options(dump_to: Path | None = None) -> str:
    """Options for every driver JVM (`spark.driver.extraJavaOptions`): UTC, so JDBC
    date-times cross java.sql.Timestamp without a zone shift (a wall-clock time in a
    daylight-saving gap of the machine's zone would move); Derby's files under `.local/`;
    the class archive when a current one exists."""
    options = [f"-Dderby.system.home={SPARK_SCRATCH / 'derby'}", "-Duser.timezone=UTC"]
    if dump_to is not None:
        options.append(f"-XX:ArchiveClassesAtExit={dump_to}")
    else:
        options += archive_options()
    return " ".join(options)


def archive_options() -> list[str]:
    archive = archive_path()
    if os.environ.get(SWITCH, "on") == "off" or archive is None or not archive.is_file():
        return []
    return [f"-XX:SharedArchiveFile={archive}", "-Xlog:cds*=off"]


def archive_path() -> Path | None:
    """Where the archive for this JVM and this pyspark is (or would be); None without Java."""
    key = archive_key()
    return None if key is None else ARCHIVE_DIR / f"spark-driver-{key}.jsa"


def archive_key() -> str | None:
    """A digest of what makes an archive valid (the JVM's binaries, the driver's class
    path) and of what it holds (the project's Spark jars, loaded by Spark's own loader)."""
    java = java_binary()
    if java is None:
        return None
    digest = hashlib.sha256()
    for path in (java, *sorted(java.parent.parent.glob("lib/server/libjvm.so"))):
        digest.update(_identity(path))
    for folder in (spark_home() / "jars", spark_jars_dir()):
        for jar in sorted(folder.glob("*.jar")):
            digest.update(_identity(jar))
    return digest.hexdigest()[:16]


def java_binary() -> Path | None:
    """The `java` Spark's launcher runs: $JAVA_HOME/bin/java, else the first on PATH."""
    home = os.environ.get("JAVA_HOME")
    found = str(Path(home) / "bin" / "java") if home else shutil.which("java")
    return Path(found).resolve() if found and Path(found).exists() else None


def spark_home() -> Path:
    """Where the driver's class path comes from: $SPARK_HOME, else the installed pyspark
    (found without importing it, which would cost the caller pyspark's import)."""
    if os.environ.get("SPARK_HOME"):
        return Path(os.environ["SPARK_HOME"])
    spec = importlib.util.find_spec("pyspark")
    assert spec is not None and spec.submodule_search_locations, "pyspark is not installed"
    return Path(next(iter(spec.submodule_search_locations)))


def _identity(path: Path) -> bytes:
    stat = path.stat()
    return f"{path}\0{stat.st_size}\0{stat.st_mtime_ns}\n".encode()


def submit_version(java_options: str, *args: str) -> tuple[int, str]:
    """`spark-submit --version` with these driver options: the cheapest driver JVM that
    starts on spark-submit's own class path. Its exit code and output."""
    home = spark_home()
    command = [str(home / "bin" / "spark-submit"), "--driver-java-options", java_options, *args, "--version"]
    try:
        run = subprocess.run(
            command, capture_output=True, text=True, env={**os.environ, "SPARK_HOME": str(home)}, timeout=300
        )
    except subprocess.TimeoutExpired:
        return 1, "spark-submit --version did not end within 300 s"
    return run.returncode, (run.stdout + run.stderr).strip()


def accepted(archive: Path) -> tuple[bool, str]:
    """Whether spark-submit's driver maps `archive` (`-Xshare:on` makes a JVM that cannot
    use it fail instead of running without it), with the JVM's message when it does not."""
    code, output = submit_version(f"-Xshare:on -XX:SharedArchiveFile={archive}")
    return code == 0, output[-2000:]


def build() -> Path | None:
    """Dump the archive by running a small Delta merge in a driver that archives every class
    it loaded at exit; skipped when the current one exists. A failure is reported and
    leaves Spark as it was without one: the archive only saves time."""
    archive = archive_path()
    if archive is None:
        print("driver_jvm: no java found; Spark drivers start without a class archive", file=sys.stderr)
        return None
    if archive.is_file():
        return archive
    ARCHIVE_DIR.mkdir(parents=True, exist_ok=True)
    failed = archive.with_suffix(".failed")
    if failed.is_file():
        return None
    log = ARCHIVE_DIR / "build.log"
    partial = archive.with_suffix(f".{os.getpid()}.partial")
    with log.open("w") as out:
        run = subprocess.run(
            [sys.executable, "-m", "spark_jobs.driver_jvm", "--workload", str(partial)],
            stdout=out,
            stderr=subprocess.STDOUT,
            env={**os.environ, SWITCH: "off"},
            cwd=PROJECT_ROOT,
        )
    ok, message = accepted(partial) if run.returncode == 0 and partial.is_file() else (False, "")
    if not ok:
        partial.unlink(missing_ok=True)
        failed.write_text(message)
        print(
            f"driver_jvm: the class archive could not be built (log: {log}); Spark drivers start without it"
            f" (remove {failed} to try again)",
            file=sys.stderr,
        )
        return None
    for old in [*ARCHIVE_DIR.glob("spark-driver-*.jsa"), *ARCHIVE_DIR.glob("spark-driver-*.failed")]:
        old.unlink(missing_ok=True)
    partial.replace(archive)
    print(f"driver_jvm: class archive for Spark drivers in {archive} ({archive.stat().st_size >> 20} MiB)")
    return archive


def _workload(dump_to: Path) -> None:
    """What a Tidemark driver does, so the classes it loads are the ones archived: a
    session, JSON parsing, a Delta write, MERGE, read and history."""
    from delta.tables import DeltaTable
    from pyspark.sql import functions as F

    from spark_jobs.session import build_session

    with tempfile.TemporaryDirectory(dir=SPARK_SCRATCH.parent) as scratch:
        spark = build_session(
            "tidemark-class-archive",
            "local[2]",
            {"spark.driver.extraJavaOptions": driver_java_options(dump_to)},
        )
        table = f"{scratch}/table"
        rows = spark.range(100).select("id", F.to_json(F.struct((F.col("id") * 2).alias("v"))).alias("json"))
        parsed = rows.select("id", F.from_json("json", "v long").alias("doc")).select("id", "doc.v")
        parsed.write.format("delta").save(table)
        changes = spark.range(50, 150).select("id", (F.col("id") * 3).alias("v"), F.lit(1).alias("ord"))
        newest = changes.groupBy("id").agg(F.max_by("v", "ord").alias("v"))
        (
            DeltaTable.forPath(spark, table)
            .alias("t")
            .merge(newest.alias("s"), "t.id = s.id")
            .whenMatchedUpdateAll()
            .whenNotMatchedInsertAll()
            .execute()
        )
        assert spark.read.format("delta").load(table).count() == 150
        DeltaTable.forPath(spark, table).history().collect()
        jvm = spark.sparkContext._gateway.proc  # type: ignore[attr-defined]
        spark.stop()
        # The JVM dumps the archive as it exits, which it does when its stdin closes; wait
        # for that, so the caller finds a complete file.
        jvm.stdin.close()
        jvm.wait(timeout=600)


if __name__ == "__main__":
    if sys.argv[1:2] == ["--workload"]:
        _workload(Path(sys.argv[2]))
    else:
        build()
