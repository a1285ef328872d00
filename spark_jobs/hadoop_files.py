"""Folders through Spark's Hadoop filesystems, so `s3a://` works wherever a local path does
(pyarrow, used elsewhere, has no s3a scheme of its own)."""

from __future__ import annotations

from typing import Any

from pyspark.sql import SparkSession


def _fs_and_path(spark: SparkSession, folder: str) -> tuple[Any, Any]:
    path = spark._jvm.org.apache.hadoop.fs.Path(folder)
    return path.getFileSystem(spark._jsc.hadoopConfiguration()), path


def subfolders(spark: SparkSession, folder: str) -> list[str]:
    """Names of the folders directly under `folder` (none if it does not exist), sorted."""
    fs, path = _fs_and_path(spark, folder)
    if not fs.exists(path):
        return []
    return sorted(s.getPath().getName() for s in fs.listStatus(path) if s.isDirectory())


def exists(spark: SparkSession, path: str) -> bool:
    fs, hadoop_path = _fs_and_path(spark, path)
    return bool(fs.exists(hadoop_path))


def delete_tree(spark: SparkSession, folder: str) -> None:
    fs, path = _fs_and_path(spark, folder)
    fs.delete(path, True)


def read_text(spark: SparkSession, path: str) -> str | None:
    """A small file's text, or None when it does not exist."""
    fs, hadoop_path = _fs_and_path(spark, path)
    if not fs.exists(hadoop_path):
        return None
    stream = fs.open(hadoop_path)
    try:
        return str(spark._jvm.org.apache.commons.io.IOUtils.toString(stream, "UTF-8"))
    finally:
        stream.close()


def write_text(spark: SparkSession, path: str, text: str) -> None:
    """Replace a small file: written beside it, then renamed over it, so a reader finds
    the old text or the new one (on object stores, where a rename is a copy, at worst a
    missing file)."""
    fs, hadoop_path = _fs_and_path(spark, path)
    tmp = spark._jvm.org.apache.hadoop.fs.Path(path + ".tmp")
    stream = fs.create(tmp, True)
    try:
        stream.write(text.encode())
    finally:
        stream.close()
    fs.delete(hadoop_path, False)
    fs.rename(tmp, hadoop_path)
