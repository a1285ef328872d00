"""The jar list every Spark job uses comes from the fetched folder, or a clear error."""

from __future__ import annotations

import pytest

from spark_jobs import classpath


def test_missing_jars_name_the_folder_and_the_fix(tmp_path, monkeypatch):
    monkeypatch.setenv("TIDEMARK_SPARK_JARS_DIR", str(tmp_path))
    with pytest.raises(classpath.MissingJarsError, match=r"make install"):
        classpath.spark_jars()


def test_jar_list_is_sorted_absolute_and_comma_joined(tmp_path, monkeypatch):
    for name in ("z-other.jar", "delta-spark_4.2_2.13-4.4.0.jar", "a.jar", "notes.txt"):
        (tmp_path / name).write_text("")
    monkeypatch.setenv("TIDEMARK_SPARK_JARS_DIR", str(tmp_path))
    jars = classpath.spark_jars()
    assert [j.rsplit("/", 1)[1] for j in jars] == ["a.jar", "delta-spark_4.2_2.13-4.4.0.jar", "z-other.jar"]
    assert classpath.spark_jars_csv() == ",".join(jars)


def test_pinned_versions_agree_between_python_and_maven():
    """pyspark/pyspark-client/delta-spark pins must match the jars the pom fetches."""
    import re

    root = classpath.PROJECT_ROOT
    pins = dict(re.findall(r"^([a-z-]+)==([\w.]+)$", (root / "requirements.in").read_text(), re.M))
    pom = (root / "jvm" / "pom.xml").read_text()
    prop = dict(re.findall(r"<([\w.]+)>([^<]+)</\1>", pom))
    assert pins["pyspark"] == pins["pyspark-client"] == prop["spark.version"]
    assert prop["spark.binary.version"] == ".".join(pins["pyspark"].split(".")[:2])
    assert pins["delta-spark"] == prop["delta.version"]
    lock = (root / "requirements.lock").read_text()
    for name in ("pyspark", "pyspark-client", "delta-spark", "apache-airflow"):
        assert f"\n{name}=={pins[name]}\n" in lock, f"requirements.lock is stale for {name}: run make lock"
