"""`field.exclude.list` and `field.renames`, as Debezium's MongoDB connector applies them
(`io.debezium.connector.mongodb.FieldSelector`), to `before`/`after`, to
`updateDescription` and to snapshot reads.

A rule is `db.collection.field.nested` (exclude) or `db.collection.field.nested:new`
(rename the last node); `db` and `collection` may hold `*` (any characters), matched
case-insensitively against the collection's namespace. A collection's rules are the
exclusions then the renames, in the order written. What they do, as Debezium does it:

- a document: each rule walks its path through embedded documents and through arrays of
  documents (not arrays of arrays) and removes the last node, or renames it: the renamed
  member goes to the end of its document (a LinkedHashMap's remove and put);
- `updatedFields` (dotted names): a name equal to the rule's path is removed or renamed
  whole; else each name the path is a prefix of is removed or renamed in its node (array
  indexes kept: `a.0.b` renamed by `a.b:c` is `a.0.c`) and the renamed names go to the
  end; a name that is a prefix of the path has the rest of the path applied inside its
  value, and stops the scan (Debezium's `break`);
- `removedFields` and `truncatedArrays` names: the first rule whose path the name equals
  or is a parent of removes it (the name is left out) or renames it.

A rename onto a name the document already has cannot be applied (Debezium throws): the
change follows event.processing.failure.handling.mode. Numeric nodes are ASCII digits
here (Java's `Character.isDigit` also takes other scripts' digits). The compiled
transcoder applies the same rules (`transcoder/src/rules.rs`); both are held to the same
bytes by `tests/unit/test_mongodb_field_rules.py`.
"""

from __future__ import annotations

import re
import struct
from dataclasses import dataclass
from typing import Any

from cdc_core.connectors.mongodb.bson_text import STRICT, MalformedBson, RawValue, document_text, elements
from cdc_core.schema.model import TableId

# Debezium's validation of each item (MongoDbConnectorConfig), `\w` ASCII as in Java.
EXCLUDE_FORM = re.compile(r"^[*|\w|\-|\s*]+(?:\.[*|\w|\-]+\.[*|\w|\-]+)+(\.[*|\w|\-]+)*\s*$", re.ASCII)
RENAME_FORM = re.compile(
    r"^[*|\w|\-|\s*]+(?:\.[*|\w|\-]+\.[*|\w|\-]+)+(\.[*|\w|\-]+)*:(?:[*|\w|\-]+)+\s*$", re.ASCII
)


class RuleConflict(MalformedBson):
    """A rule that cannot be applied to a change (a rename onto a name the document
    has, a removed field's name with an empty part): Debezium throws, the change follows
    event.processing.failure.handling.mode."""


def check_excludes(items: list[str]) -> str | None:
    for item in items:
        if not EXCLUDE_FORM.search(item):
            return (
                f"{item!r} is not of the form db.collection.field[.nested...] (db and collection may hold *)"
            )
    return None


def check_renames(items: list[str]) -> str | None:
    for item in items:
        if not RENAME_FORM.search(item):
            return f"{item!r} is not of the form db.collection.field[.nested...]:newname"
    return None


def java_trim(text: str) -> str:
    """Java's `String.trim`: characters up to U+0020 off both ends."""
    start, end = 0, len(text)
    while start < end and text[start] <= " ":
        start += 1
    while end > start and text[end - 1] <= " ":
        end -= 1
    return text[start:end]


def java_split(text: str, separator: str) -> list[str]:
    """Java's `Pattern.split`: trailing empty parts dropped, the text itself when the
    separator is not in it."""
    if separator not in text:
        return [text]
    parts = text.split(separator)
    while parts and parts[-1] == "":
        parts.pop()
    return parts


def parts_of(name: str) -> list[str]:
    """A dotted name's nodes, as Debezium's `parseIntoParts(name, ..., length < 1)`."""
    nodes = java_split(java_trim(name), ".")
    if not nodes or any(node == "" for node in nodes):
        raise RuleConflict(
            "a field name with an empty part, which field.exclude.list/field.renames cannot read"
        )
    return nodes


def numeric(node: str) -> bool:
    return node != "" and all("0" <= c <= "9" for c in node)


def without_indexes(nodes: list[str]) -> list[str]:
    """The nodes without array indexes; unchanged where two indexes follow each other
    (arrays of arrays are not looked into)."""
    if len(nodes) <= 1:
        return nodes
    kept: list[str] | None = None
    previous, offset = False, 0
    for i, node in enumerate(nodes):
        if numeric(node):
            if previous:
                return nodes
            previous = True
            if kept is None:
                kept = list(nodes)
            del kept[i - offset]
            offset += 1
        else:
            previous = False
    return nodes if kept is None else kept


def starts_with(begin: list[str] | tuple[str, ...], source: list[str] | tuple[str, ...]) -> bool:
    return len(begin) <= len(source) and all(source[i] == begin[i] for i in range(len(begin)))


@dataclass(frozen=True)
class FieldPath:
    """One rule: the path of a field (`nodes`) in the collections `namespace` matches;
    `new_name` None: exclude it."""

    namespace: re.Pattern[str]
    nodes: tuple[str, ...]
    new_name: str | None

    @property
    def field(self) -> str:
        return ".".join(self.nodes)

    def as_tuple(self) -> tuple[list[str], str | None]:
        """What the compiled transcoder is given."""
        return list(self.nodes), self.new_name

    def renamed(self, nodes: list[str]) -> str:
        """A dotted name with the node at this path's last place renamed (indexes kept)."""
        out, i, last = [], 0, len(self.nodes) - 1
        for node in nodes:
            if numeric(node):
                out.append(node)
            else:
                out.append(self.new_name if i == last else node)
                i += 1
        return ".".join(out)

    # ------------------------------------------------------------------ documents

    def apply(self, doc: dict[str, Any], begin: int = 0) -> None:
        current = doc
        nodes = self.nodes
        for i in range(begin, len(nodes)):
            node = nodes[i]
            if i == len(nodes) - 1:
                self._at(current, node, node if self.new_name is None else self.new_name)
                return
            found = current.get(node)
            if isinstance(found, dict):
                current = found
                continue
            self._within_list(found, i + 1)
            return

    def _within_list(self, value: Any, begin: int) -> None:
        if isinstance(value, list):
            for item in value:
                if isinstance(item, dict):
                    self.apply(item, begin)

    def _at(self, doc: dict[str, Any], name: str, new_name: str) -> None:
        """Remove `name`, or rename it to `new_name` (at the end of the document)."""
        if self.new_name is None:
            doc.pop(name, None)
        elif name in doc:
            if new_name in doc:
                raise RuleConflict(
                    f"field.renames cannot rename {name!r}: the document already has {new_name!r}"
                )
            doc[new_name] = doc.pop(name)

    # ------------------------------------------------------------------ updatedFields

    def apply_change(self, doc: dict[str, Any]) -> None:
        field = self.field
        if field in doc:
            new_field = field if self.new_name is None else ".".join((*self.nodes[:-1], self.new_name))
            self._at(doc, field, new_field)
            return
        moved: list[tuple[str, Any]] = []
        nodes = list(self.nodes)
        for key in list(doc):
            value = doc[key]
            origin = java_split(key, ".")
            key_nodes = without_indexes(origin)
            if len(key_nodes) > len(nodes):
                if starts_with(nodes, key_nodes):
                    if self.new_name is not None:
                        moved.append((self.renamed(origin), value))
                    del doc[key]
            elif len(key_nodes) < len(nodes):
                if starts_with(key_nodes, nodes):
                    if isinstance(value, dict):
                        self.apply(value, len(key_nodes))
                    else:
                        self._within_list(value, len(key_nodes))
                    break
            elif key_nodes == nodes:
                if self.new_name is not None:
                    moved.append((self.renamed(origin), value))
                del doc[key]
        for name, value in moved:
            if name in doc:
                raise RuleConflict(f"field.renames cannot rename to {name!r}: the change already has it")
            doc[name] = value

    # ------------------------------------------------------------------ names

    def matches_name(self, name: str) -> bool:
        return starts_with(without_indexes(parts_of(name)), self.nodes)

    def name_of(self, name: str) -> str | None:
        return None if self.new_name is None else self.renamed(parts_of(name))


def rules_of(excludes: list[str], renames: list[str]) -> list[FieldPath]:
    """The configured rules in Debezium's order: the exclusions, then the renames."""
    out = []
    for item in excludes:
        nodes = java_split(java_trim(item), ".")
        out.append(FieldPath(_namespace(nodes), tuple(nodes[2:]), None))
    for item in renames:
        old, new = java_split(java_trim(item), ":")
        nodes = java_split(java_trim(old), ".")
        out.append(FieldPath(_namespace(nodes), tuple(nodes[2:]), new))
    return out


def _namespace(nodes: list[str]) -> re.Pattern[str]:
    regex = nodes[0].replace("*", ".*") + r"\." + nodes[1].replace("*", ".*")
    return re.compile(java_trim(regex), re.IGNORECASE | re.ASCII)


class FieldRules:
    """The rules of a connector, by collection."""

    def __init__(self, excludes: list[str] | None, renames: list[str] | None) -> None:
        self.paths = rules_of(list(excludes or ()), list(renames or ()))
        self._by_table: dict[TableId, tuple[FieldPath, ...]] = {}

    @classmethod
    def of(cls, config: Any) -> FieldRules | None:
        """The connector's rules, None when it has none."""
        rules = cls(config.get("field.exclude.list"), config.get("field.renames"))
        return rules if rules.paths else None

    def of_table(self, table: TableId) -> tuple[FieldPath, ...]:
        found = self._by_table.get(table)
        if found is None:
            namespace = f"{table.database}.{table.table}"
            found = tuple(p for p in self.paths if p.namespace.fullmatch(namespace))
            self._by_table[table] = found
        return found


# ---------------------------------------------------------------------------- applying them


def apply_to_document(data: bytes, paths: tuple[FieldPath, ...]) -> bytes:
    """A document (its BSON) with `paths` applied, as BSON. The document is read whole
    first, as the Java driver does: a malformed part fails it even where a rule removes
    it."""
    document_text(data, STRICT)
    tree = _tree(data)
    for path in paths:
        path.apply(tree)
    return _encode(tree)


def apply_to_change(data: bytes, paths: tuple[FieldPath, ...]) -> bytes:
    """`updatedFields` (its BSON) with `paths` applied, as BSON."""
    document_text(data, STRICT)
    tree = _tree(data)
    for path in paths:
        path.apply_change(tree)
    return _encode(tree)


def apply_to_name(name: str, paths: tuple[FieldPath, ...]) -> str | None:
    """A removed field's or truncated array's name: the first rule it matches removes it
    (None) or renames it."""
    for path in paths:
        if path.matches_name(name):
            return path.name_of(name)
    return name


def _tree(data: bytes) -> dict[str, Any]:
    """A document as ordered members (a repeated name at its first place, last value):
    embedded documents as dicts, arrays as lists, every other value as (type, bytes)."""
    return {name: _node(value) for name, value in elements(data)}


def _node(value: RawValue) -> Any:
    if value.kind == 0x03:
        return _tree(value.data)
    if value.kind == 0x04:
        return [_node(item) for _, item in elements(value.data)]
    return (value.kind, value.data)


def _encode(tree: dict[str, Any]) -> bytes:
    return _document(((name, node) for name, node in tree.items()))


def _document(members: Any) -> bytes:
    body = b"".join(_element(name, node) for name, node in members)
    return struct.pack("<i", len(body) + 5) + body + b"\0"


def _element(name: str, node: Any) -> bytes:
    key = name.encode()
    if isinstance(node, dict):
        return b"\x03" + key + b"\0" + _encode(node)
    if isinstance(node, list):
        return b"\x04" + key + b"\0" + _document((str(i), item) for i, item in enumerate(node))
    kind, data = node
    return bytes([kind]) + key + b"\0" + data
