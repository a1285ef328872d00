"""The merge's tables run side by side (`spark_jobs.merge.table_pool`): each call in a
session of its own that starts with the caller's settings, every table ended before a
failure is raised, and none started after it."""

from __future__ import annotations

import threading
import time

import pytest

from spark_jobs.merge.table_pool import merge_each


class Conf:
    def __init__(self, values=None):
        self.values = dict(values or {})

    @property
    def getAll(self):
        return dict(self.values)

    def isModifiable(self, key):
        return not key.startswith("static.")

    def set(self, key, value):
        self.values[key] = value


class Session:
    def __init__(self, values=None):
        self.conf = Conf(values)

    def newSession(self):
        return Session()


def test_each_table_gets_a_session_of_its_own_with_the_callers_settings():
    spark = Session({"spark.sql.shuffle.partitions": "4", "static.warehouse": "x"})
    seen = []
    lock = threading.Lock()

    def merge(session, item):
        session.conf.set("metadata", item)
        time.sleep(0.01)
        with lock:
            seen.append((item, session.conf.values["metadata"], dict(session.conf.values)))

    merge_each(spark, list(range(6)), merge, parallel=3)
    assert sorted(i for i, _, _ in seen) == list(range(6))
    for item, metadata, values in seen:
        assert metadata == item  # no other table's setting reached it
        assert values["spark.sql.shuffle.partitions"] == "4" and "static.warehouse" not in values
    assert "metadata" not in spark.conf.values


def test_one_at_a_time_uses_the_callers_session():
    spark = Session()
    used = []
    merge_each(spark, [1, 2], lambda session, item: used.append(session), parallel=1)
    assert used == [spark, spark]


def test_a_failure_is_raised_after_the_running_tables_end_and_no_other_starts():
    spark = Session()
    started, ended = [], []
    lock = threading.Lock()

    def merge(session, item):
        with lock:
            started.append(item)
        if item == 0:
            raise RuntimeError("table 0 refused")
        time.sleep(0.2)
        with lock:
            ended.append(item)

    with pytest.raises(RuntimeError, match="table 0 refused"):
        merge_each(spark, list(range(10)), merge, parallel=2)
    assert sorted(ended) == sorted(i for i in started if i != 0)  # whatever started, ended
    assert len(started) < 10  # the rest never started
