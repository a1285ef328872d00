"""Property definitions: name, type, default, validation, and the text the README shows.

Properties use Debezium's names so a Debezium user recognises them. The generic ones are
declared here; each connector declares its own (`database.server.id`, type-handling
modes, ...) and the two lists are validated together, so an unknown property is always
reported by name at start.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from cdc_core.errors import ConfigError

if TYPE_CHECKING:
    from cdc_core.config.connector_config import ConnectorConfig


@dataclass(frozen=True)
class Property:
    """One configuration property.

    `kind` is one of: str, int, bool, enum, list (comma-separated), regex-list
    (comma-separated anchored regexes), and `pattern` makes this a family of properties
    whose names match a regex (e.g. `column.mask.with.(\\d+).chars`).
    """

    name: str
    kind: str
    default: Any = None
    description: str = ""
    choices: Sequence[str] = ()
    required: bool = False
    minimum: int | None = None
    pattern: str | None = None
    secret: bool = False
    check: Callable[[Any], str | None] | None = None
    # Another name of the property `alias_of` (a connector's own word for a common one,
    # e.g. MongoDB's collection.include.list): its value is that property's.
    alias_of: str | None = None
    # Values a user may bring from Debezium that this connector does not take, each with
    # the reason and what to write instead (an enum's refusal then says why, not only
    # which values it takes).
    refused: Mapping[str, str] = field(default_factory=dict)
    # A check that needs other properties too (the whole validated configuration): the
    # problem, or None. Run once every property has its value.
    check_with: Callable[[ConnectorConfig], str | None] | None = None

    def matches(self, key: str) -> re.Match[str] | None:
        if self.pattern is None:
            return re.fullmatch(re.escape(self.name), key)
        return re.fullmatch(self.pattern, key)

    def parse(self, key: str, raw: Any) -> Any:
        """Convert a YAML value to this property's type, or raise ConfigError naming `key`."""
        value = _convert(self, key, raw)
        if self.check is not None and value is not None:
            problem = self.check(value)
            if problem:
                raise ConfigError(key, problem)
        return value


def _convert(prop: Property, key: str, raw: Any) -> Any:
    if raw is None:
        return None
    kind = prop.kind
    if kind == "str":
        if isinstance(raw, (dict, list)):
            raise ConfigError(key, f"expected a string, got {type(raw).__name__}")
        return str(raw)
    if kind == "int":
        if isinstance(raw, bool):
            raise ConfigError(key, f"expected an integer, got {raw!r}")
        try:
            value = int(str(raw).strip())
        except ValueError:
            raise ConfigError(key, f"expected an integer, got {raw!r}") from None
        if prop.minimum is not None and value < prop.minimum:
            raise ConfigError(key, f"must be at least {prop.minimum}, got {value}")
        return value
    if kind == "bool":
        if isinstance(raw, bool):
            return raw
        text = str(raw).strip().lower()
        if text in ("true", "false"):
            return text == "true"
        raise ConfigError(key, f"expected true or false, got {raw!r}")
    if kind == "enum":
        text = str(raw).strip().lower()
        if text in prop.refused:
            raise ConfigError(key, f"{text} is not supported: {prop.refused[text]}")
        if text not in prop.choices:
            raise ConfigError(key, f"expected one of {', '.join(prop.choices)}, got {raw!r}")
        return text
    if kind == "list":
        return _split(raw)
    if kind == "regex-list":
        return compile_regex_list(key, _split(raw))
    raise AssertionError(f"unknown property kind {kind}")


def _split(raw: Any) -> list[str]:
    """Items of a YAML list, or of a comma-separated text: a comma inside brackets or
    braces (`decimal(12,2)`, a regex's `{1,3}`) is part of its item."""
    items = raw if isinstance(raw, list) else re.split(r",(?![^(\[{]*[)\]}])", str(raw))
    return [str(i).strip() for i in items if str(i).strip()]


def compile_regex_list(key: str, patterns: list[str]) -> list[re.Pattern[str]]:
    """Debezium's include/exclude lists: each regex must match the whole identifier."""
    compiled = []
    for p in patterns:
        try:
            compiled.append(re.compile(p))
        except re.error as exc:
            raise ConfigError(key, f"invalid regular expression {p!r}: {exc}") from None
    return compiled


def full_match_any(patterns: list[re.Pattern[str]], text: str) -> bool:
    return any(p.fullmatch(text) for p in patterns)
