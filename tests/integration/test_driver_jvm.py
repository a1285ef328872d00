"""The class archive `make install` dumps is the one Spark drivers start with, and a JVM
that cannot use an archive runs without it, silently."""

from __future__ import annotations

import os

import pytest

from spark_jobs import driver_jvm

pytestmark = pytest.mark.integration


def test_the_test_session_started_with_the_archive_that_install_dumped(spark):
    archive = driver_jvm.archive_path()
    assert archive is not None and archive.is_file(), "make install dumps it (spark_jobs/driver_jvm.py)"
    runtime = spark._jvm.java.lang.management.ManagementFactory.getRuntimeMXBean()
    assert f"-XX:SharedArchiveFile={archive}" in list(runtime.getInputArguments())
    # spark-submit's driver maps it: with -Xshare:on a JVM that could not would fail.
    accepted, message = driver_jvm.accepted(archive)
    assert accepted, message


@pytest.mark.parametrize("stale", ["garbage", "other class path"])
def test_a_driver_runs_without_a_stale_archive_and_says_nothing_of_it(tmp_path, monkeypatch, stale):
    assert driver_jvm.archive_path().is_file()
    extra = ["--driver-class-path", str(next(driver_jvm.spark_jars_dir().glob("*.jar")))]
    if stale == "garbage":
        monkeypatch.setattr(driver_jvm, "ARCHIVE_DIR", tmp_path)
        driver_jvm.archive_path().write_bytes(os.urandom(4096))
        extra = []
    options = driver_jvm.driver_java_options()
    assert "SharedArchiveFile" in options
    code, output = driver_jvm.submit_version(options, *extra)
    assert code == 0, output
    assert "version" in output
    said = output.lower()
    assert "[cds" not in said and "shared archive" not in said, said
