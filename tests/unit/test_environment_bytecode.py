"""The environment `make install` builds ships its modules compiled.

With PYTHONDONTWRITEBYTECODE set (this machine, CI) no import writes bytecode, so a
module without it is compiled again by every process that imports it: the Parquet log's
landing thread spent 1.4 s of each streamer's start compiling pyarrow and pandas."""

from __future__ import annotations

import importlib
import importlib.util
from pathlib import Path

import pytest

# What the streamer, the Parquet log, the merge and the DAGs import at start.
PACKAGES = ["pyarrow", "pandas", "pyspark", "pymysqlreplication", "orjson", "airflow.sdk", "yaml"]


@pytest.mark.parametrize("name", PACKAGES)
def test_every_module_of_an_installed_package_has_its_bytecode(name: str) -> None:
    module = importlib.import_module(name)
    assert module.__file__ is not None and module.__file__.endswith("__init__.py")
    root = Path(module.__file__).parent
    missing = [
        str(source.relative_to(root))
        for source in root.rglob("*.py")
        if not Path(importlib.util.cache_from_source(str(source))).exists()
    ]
    assert not missing, f"{len(missing)} modules of {name} not compiled, e.g. {missing[:5]}"
