"""A VStream filter's rules: which tables of a keyspace a stream carries.

Rules are tried in order and the first match wins. `match` is the bare table name, or,
when it starts with `/`, an unanchored regular expression with every leading and
trailing `/` trimmed (`"/t1"` also matches `t10`), as `vstreamer.ruleMatches` does.

The double supports the rule filters a CDC client uses, `""` and `select * from <t>`
(all columns, all rows). Column lists, `where` clauses and key-range filters need
Vitess's query planner and vschema; the double refuses them rather than ignore them."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

import grpc

from tests.support.vtgate.errors import VStreamError

_SELECT_ALL = re.compile(r"\s*select\s+\*\s+from\s+(`(?:[^`]|``)+`|[\w$]+)\s*;?\s*", re.I)


@dataclass(frozen=True)
class Rule:
    match: str
    filter: str


class Rules:
    """The rules of a request's filter (VTGate's default, `/.*`, when there is none)."""

    def __init__(self, rules: list[Any]) -> None:
        self.rules = tuple(Rule(r.match, r.filter) for r in rules) or (Rule("/.*", ""),)
        for rule in self.rules:
            if rule.filter and not _SELECT_ALL.fullmatch(rule.filter):
                raise VStreamError(
                    grpc.StatusCode.INVALID_ARGUMENT,
                    f"the VTGate double supports only the rule filters '' and 'select * from <table>'; "
                    f"rule {rule.match!r} has {rule.filter!r}",
                )
            if rule.match.startswith("/"):
                try:
                    re.compile(rule.match.strip("/"))
                except re.error as exc:
                    raise VStreamError(
                        grpc.StatusCode.INVALID_ARGUMENT, f"invalid regular expression {rule.match!r}: {exc}"
                    ) from None

    def matches(self, table: str) -> bool:
        for rule in self.rules:
            if rule.match.startswith("/"):
                if re.search(rule.match.strip("/"), table):
                    return True
            elif rule.match == table:
                return True
        return False

    def named_tables(self) -> list[str]:
        """The tables rules name exactly (the copy phase requires them to exist)."""
        return [r.match for r in self.rules if not r.match.startswith("/")]
