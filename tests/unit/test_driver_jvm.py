"""The driver JVM's options: UTC always, and the class archive only when one exists for
this JVM and this class path (a stale archive is never passed)."""

from __future__ import annotations

import pytest

from spark_jobs import driver_jvm


@pytest.fixture
def machine(tmp_path, monkeypatch):
    """A JDK, a pyspark and a jars folder made of files, and an empty archive folder."""
    java_home = tmp_path / "jdk"
    (java_home / "bin").mkdir(parents=True)
    (java_home / "bin" / "java").write_text("#!/bin/sh\n")
    (java_home / "lib" / "server").mkdir(parents=True)
    (java_home / "lib" / "server" / "libjvm.so").write_text("jvm")
    spark_home = tmp_path / "pyspark"
    (spark_home / "jars").mkdir(parents=True)
    (spark_home / "jars" / "spark-core.jar").write_text("core")
    jars = tmp_path / "jars"
    jars.mkdir()
    (jars / "delta-spark_4.2_2.13-4.4.0.jar").write_text("delta")
    monkeypatch.setenv("JAVA_HOME", str(java_home))
    monkeypatch.setenv("SPARK_HOME", str(spark_home))
    monkeypatch.setenv("TIDEMARK_SPARK_JARS_DIR", str(jars))
    monkeypatch.delenv(driver_jvm.SWITCH, raising=False)
    monkeypatch.setattr(driver_jvm, "ARCHIVE_DIR", tmp_path / "archives")
    return tmp_path


@pytest.mark.parametrize(
    "change",
    [
        "jdk/lib/server/libjvm.so",
        "jdk/bin/java",
        "pyspark/jars/spark-core.jar",
        "jars/delta-spark_4.2_2.13-4.4.0.jar",
    ],
)
def test_an_archive_belongs_to_one_jvm_and_one_set_of_jars(machine, change):
    before = driver_jvm.archive_path()
    (machine / change).write_text("another build of it")
    assert driver_jvm.archive_path() != before


def test_a_jar_added_to_the_driver_class_path_names_another_archive(machine):
    before = driver_jvm.archive_key()
    (machine / "pyspark" / "jars" / "extra.jar").write_text("x")
    assert driver_jvm.archive_key() != before


def test_drivers_get_the_archive_only_when_the_current_one_exists(machine, monkeypatch):
    assert "SharedArchiveFile" not in driver_jvm.driver_java_options()
    archive = driver_jvm.archive_path()
    archive.parent.mkdir()
    archive.write_bytes(b"dumped")
    options = driver_jvm.driver_java_options().split()
    assert f"-XX:SharedArchiveFile={archive}" in options
    # Should the JVM decline it anyway, its warning stays off the job's output.
    assert "-Xlog:cds*=off" in options
    monkeypatch.setenv(driver_jvm.SWITCH, "off")
    assert "SharedArchiveFile" not in driver_jvm.driver_java_options()


def test_every_driver_runs_in_utc_with_or_without_an_archive(machine, tmp_path):
    assert "-Duser.timezone=UTC" in driver_jvm.driver_java_options().split()
    dumping = driver_jvm.driver_java_options(dump_to=tmp_path / "new.jsa").split()
    assert "-Duser.timezone=UTC" in dumping
    assert f"-XX:ArchiveClassesAtExit={tmp_path / 'new.jsa'}" in dumping


def test_without_java_there_is_no_archive(machine, monkeypatch):
    monkeypatch.setenv("JAVA_HOME", str(machine / "no-jdk"))
    assert driver_jvm.archive_path() is None
    assert driver_jvm.build() is None
    assert "SharedArchiveFile" not in driver_jvm.driver_java_options()


def test_airflow_jobs_get_the_driver_options_unless_they_set_their_own(machine):
    from tidemark_airflow.operators.spark_jobs import DEFAULT_CONF, driver_conf

    conf = driver_conf(DEFAULT_CONF)
    assert conf["spark.driver.extraJavaOptions"] == driver_jvm.driver_java_options()
    assert conf["spark.ui.enabled"] == "false"
    own = {"spark.driver.extraJavaOptions": "-Xss4m"}
    assert driver_conf(own)["spark.driver.extraJavaOptions"] == "-Xss4m"


def test_a_failed_dump_leaves_drivers_without_an_archive_and_is_not_retried(machine, capsys):
    """The fake JDK cannot start a driver, so the dump fails as a broken JDK would."""
    assert driver_jvm.build() is None
    assert "could not be built" in capsys.readouterr().err
    assert not driver_jvm.archive_path().exists()
    assert "SharedArchiveFile" not in driver_jvm.driver_java_options()
    # Every `make install` would otherwise spend the dump's minute again on the same JDK.
    assert driver_jvm.build() is None
    assert capsys.readouterr().err == ""
