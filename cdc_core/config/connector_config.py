"""Load and validate a connector's YAML file.

The file holds Debezium-named properties (flat dotted keys; nested YAML maps are
flattened with dots). Everything is validated at start: an unknown property, a missing
required one, or a bad value fails with a message naming it. Secrets never come from
the file: the password is read from an environment variable (or handed over by an
Airflow hook) and wrapped so that it cannot end up in a log line or an exception.
"""

from __future__ import annotations

import difflib
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from cdc_core.config.common import COMMON_PROPERTIES
from cdc_core.config.orchestration import ORCHESTRATION_PROPERTIES
from cdc_core.config.properties import Property
from cdc_core.config.status_properties import STATUS_PROPERTIES
from cdc_core.errors import ConfigError


class Secret:
    """A value that prints as `***` everywhere except through `reveal()`."""

    __slots__ = ("_value",)

    def __init__(self, value: str) -> None:
        self._value = value

    def reveal(self) -> str:
        return self._value

    def __repr__(self) -> str:
        return "Secret('***')"

    __str__ = __repr__

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Secret) and other._value == self._value

    def __hash__(self) -> int:
        return hash(self._value)


@dataclass(frozen=True)
class ConnectorConfig:
    """Validated properties. `get` returns the value or the property's default."""

    values: Mapping[str, Any]
    properties: tuple[Property, ...]
    secrets: Mapping[str, Secret] = field(default_factory=dict)
    source_path: str | None = None

    def get(self, name: str) -> Any:
        if name in self.values:
            return self.values[name]
        for prop in self.properties:
            if prop.pattern is None and prop.name == name:
                return prop.default
        raise KeyError(f"{name} is not a declared property")

    def family(self, prop_name: str) -> list[tuple[tuple[str, ...], Any]]:
        """Values of a pattern property (e.g. all `column.mask.with.N.chars`), with the
        regex groups of each key (e.g. `("12",)`)."""
        prop = next(p for p in self.properties if p.name == prop_name)
        found = []
        for key, value in self.values.items():
            m = prop.matches(key)
            if m and prop.pattern is not None:
                found.append((m.groups(), value))
        return found

    def secret(self, name: str) -> Secret | None:
        return self.secrets.get(name)

    @property
    def name(self) -> str:
        return self.values["name"]

    @property
    def topic_prefix(self) -> str:
        return self.values["topic.prefix"]

    def state_directory(self, project_root: Path | None = None) -> Path:
        return Path(self.location("state.directory", "state", project_root))

    def location(self, name: str, folder: str, project_root: Path | None = None) -> str:
        """The location property `name`, or `<project>/.local/<folder>/<connector name>`:
        every connector's files have a working default on a developer machine."""
        configured = self.values.get(name)
        if configured:
            return str(configured)
        root = project_root or Path(os.environ.get("TIDEMARK_ROOT", Path.cwd()))
        return str(root / ".local" / folder / self.name)


def flatten(data: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    flat: dict[str, Any] = {}
    for key, value in data.items():
        full = f"{prefix}{key}"
        if isinstance(value, Mapping):
            flat.update(flatten(value, f"{full}."))
        else:
            flat[full] = value
    return flat


def validate(
    raw: Mapping[str, Any],
    properties: list[Property],
    secrets: Mapping[str, str] | None = None,
    environ: Mapping[str, str] | None = None,
    source_path: str | None = None,
) -> ConnectorConfig:
    """Check every key against `properties` and convert every value."""
    environ = os.environ if environ is None else environ
    values: dict[str, Any] = {}
    for key, value in raw.items():
        prop = _find(properties, key)
        if prop.pattern is not None and key.endswith(("password", "secret")):  # `sink.kafka.producer.*`
            raise ConfigError(
                key,
                "secrets must not be written in the connector file; give a password through the environment "
                "(for Kafka's SASL password: the variable named by sink.kafka.sasl.password.env, default "
                "TIDEMARK_KAFKA_SASL_PASSWORD)",
            )
        if prop.secret:
            raise ConfigError(
                key,
                "secrets must not be written in the connector file; put the password in the environment "
                f"variable named by {key}.env (default {_secret_env_default(properties, key)}) or in an "
                "Airflow connection",
            )
        values[key] = prop.parse(key, value)
    for prop in properties:
        if prop.alias_of and values.get(prop.name) is not None:
            other = values.get(prop.alias_of)
            if other is not None and other != values[prop.name]:
                raise ConfigError(prop.name, f"says otherwise than {prop.alias_of}; set one of them")
            values[prop.alias_of] = values[prop.name]
    seen: set[str] = set()
    for prop in properties:  # a connector's own definition of a name comes first and wins
        if prop.name in seen:
            continue
        seen.add(prop.name)
        if prop.required and prop.pattern is None and values.get(prop.name) in (None, ""):
            raise ConfigError(prop.name, "is required")
    resolved = _resolve_secrets(properties, values, secrets or {}, environ)
    return ConnectorConfig(values, tuple(properties), resolved, source_path)


def _find(properties: list[Property], key: str) -> Property:
    for prop in properties:
        if prop.matches(key):
            return prop
    names = [p.name for p in properties if p.pattern is None]
    hint = difflib.get_close_matches(key, names, n=1)
    suffix = f" (did you mean {hint[0]}?)" if hint else ""
    raise ConfigError(key, f"unknown property{suffix}")


def _secret_env_default(properties: list[Property], key: str) -> str:
    env_prop = next((p for p in properties if p.name == f"{key}.env"), None)
    return env_prop.default if env_prop else "?"


def _resolve_secrets(
    properties: list[Property],
    values: dict[str, Any],
    handed: Mapping[str, str],
    environ: Mapping[str, str],
) -> dict[str, Secret]:
    resolved: dict[str, Secret] = {}
    for prop in properties:
        if not prop.secret:
            continue
        if prop.name in handed:
            resolved[prop.name] = Secret(handed[prop.name])
            continue
        env_name = values.get(f"{prop.name}.env") or _secret_env_default(properties, prop.name)
        if env_name in environ:
            resolved[prop.name] = Secret(environ[env_name])
    return resolved


def load_config(
    path: str | Path,
    connector_properties: list[Property] | None = None,
    secrets: Mapping[str, str] | None = None,
    overrides: Mapping[str, Any] | None = None,
    environ: Mapping[str, str] | None = None,
) -> ConnectorConfig:
    """Read a YAML connector file and validate it.

    `connector_properties` are the connector's own declarations; when None, they are
    looked up from `connector.class` (see `cdc_core.connectors.registry`).
    """
    path = Path(path)
    try:
        data = yaml.safe_load(path.read_text()) or {}
    except OSError as exc:
        raise ConfigError(str(path), f"cannot read the connector file: {exc.strerror}") from None
    except yaml.YAMLError as exc:
        raise ConfigError(str(path), f"not valid YAML: {exc}") from None
    if not isinstance(data, Mapping):
        raise ConfigError(str(path), "the connector file must be a mapping of property: value")
    raw = {**flatten(data), **(overrides or {})}
    if connector_properties is None:
        from cdc_core.connectors.registry import connector_for

        cls = raw.get("connector.class")
        if not cls:
            raise ConfigError("connector.class", "is required")
        connector_properties = list(connector_for(str(cls)).properties)
    # The connector's own first: a connector may refine a common property (its default,
    # its choices), as Vitess does `snapshot.mode`, and the first declaration wins.
    return validate(
        raw,
        connector_properties + COMMON_PROPERTIES + STATUS_PROPERTIES + ORCHESTRATION_PROPERTIES,
        secrets,
        environ,
        str(path),
    )
