"""The connectors the DAGs are generated from: one YAML file each in the connectors folder.

Reading them is file access only (no database, no network), so generating DAGs from them
at parse time is cheap and safe. The folder is `$TIDEMARK_CONNECTORS_DIR`, by default
`connectors/` at the project's root.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

from cdc_core.config.connector_config import ConnectorConfig, load_config
from cdc_core.errors import ConfigError

PROJECT_ROOT = Path(__file__).resolve().parents[2]


def connectors_dir() -> Path:
    return Path(os.environ.get("TIDEMARK_CONNECTORS_DIR") or PROJECT_ROOT / "connectors")


def connector_paths() -> list[Path]:
    """The connector files of the folder, in name order (not yet read)."""
    return sorted(connectors_dir().glob("*.yaml"))


def _read(path: Path) -> ConnectorConfig | None:
    """A connector file's configuration, without secrets; None when the file is gone since
    the folder was listed (removed, or replaced by an editor's rename): that connector is
    not there, and every other one's DAGs still are."""
    try:
        return load_config(path, environ={})
    except ConfigError:
        if not path.exists():
            return None
        raise


def connector_files() -> dict[str, Path]:
    """Connector name → its file; a name used twice is an error naming both files."""
    found: dict[str, Path] = {}
    for path in connector_paths():
        config = _read(path)
        if config is None:
            continue
        name = config.name
        if name in found:
            raise ConfigError("name", f"connector {name!r} is defined in both {found[name]} and {path}")
        found[name] = path
    return found


def connector_file(name: str) -> Path:
    files = connector_files()
    if name not in files:
        known = ", ".join(sorted(files)) or "none"
        raise ConfigError("connector", f"no connector named {name!r} in {connectors_dir()} (known: {known})")
    return files[name]


def load(
    name: str, secrets: Mapping[str, str] | None = None, overrides: Mapping[str, object] | None = None
) -> ConnectorConfig:
    """A connector's validated configuration; `secrets` and `overrides` (from an Airflow
    connection) take precedence over the environment and the file."""
    return load_config(connector_file(name), secrets=secrets, overrides=overrides)


def configs() -> list[ConnectorConfig]:
    """Every connector, without secrets: what DAG generation needs."""
    return [config for path in connector_files().values() if (config := _read(path)) is not None]


def slug(name: str) -> str:
    """A connector name as it appears in DAG ids."""
    return "".join(c if c.isalnum() or c in "_-." else "_" for c in name)
