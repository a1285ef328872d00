"""`additional-conditions` in Debezium's MongoDB form: a JSON query document.

Debezium's MongoDB connector takes a filter as a query document (`{"color": "blue"}`,
parsed by the Java driver's `Document.parse`). A document collection's filter may be one,
as text or as a JSON object in the signal's data, beside the grammar of `conditions.py`.
It is untrusted like any filter: checked here against an allow-list, its Extended JSON
values (canonical, relaxed or legacy) read into typed literals (`literals.py`), and the
connector renders the checked document as a filter document of BSON values: nothing is
sent as text and nothing as JavaScript.

Allowed, in field position (`{"qty": {"$gt": 5}}`) unless said otherwise:

- comparison: `$eq`, `$ne`, `$gt`, `$gte`, `$lt`, `$lte`, `$in`, `$nin`;
- logical: `$and`, `$or`, `$nor` (at the top of a query: arrays of queries), `$not`
  (operators or a regular expression);
- element: `$exists`, `$type` (type aliases or codes);
- array: `$all`, `$elemMatch` (a query or operators), `$size`;
- evaluation: `$regex` with `$options` (`imxsu`), `$mod`;
- bitwise: `$bitsAllSet`, `$bitsAllClear`, `$bitsAnySet`, `$bitsAnyClear`.

Refused with the reason: `$where`, `$function` and `$accumulator` (they run JavaScript on
the server), `$expr` (its aggregation expressions can hide `$function` or
`$accumulator`), any other operator (`$text`, `$jsonSchema`, geospatial ones, ...), a
`$code` value, a field path with an empty part or a part starting with `$` (`a..b`,
`a.$gt`), a `$`-named field in an embedded document value, operators mixed with field
names in one object, a key given twice, NaN written bare. Limits as the grammar's: the
text at most `MAX_LENGTH` characters, objects and arrays nested at most `MAX_DEPTH` deep,
an array at most `MAX_IN_LIST` values, a number within `MAX_DIGITS` digits and exponents
within ±`MAX_EXPONENT`. A JSON number with a fraction is a double (as in Extended JSON);
an integer beyond 64 bits a double too.
"""

from __future__ import annotations

import binascii
import json
from decimal import Decimal
from typing import Any

from cdc_core.signals.conditions import MAX_DEPTH, MAX_IN_LIST, ConditionError, QueryDocument
from cdc_core.signals.literals import BinaryLiteral, LiteralError, RegexLiteral, bounded_number, extended_json

CODE = {
    "$where": "runs JavaScript on the server",
    "$function": "runs JavaScript on the server",
    "$accumulator": "runs JavaScript on the server",
    "$expr": "takes aggregation expressions, which can run JavaScript ($function, $accumulator); write the "
    'comparison with a query operator instead, e.g. {"qty": {"$gt": 5}}',
}
LOGICAL = ("$and", "$or", "$nor")
COMPARISON = ("$eq", "$ne", "$gt", "$gte", "$lt", "$lte")
LISTS = ("$in", "$nin", "$all")
BITS = ("$bitsAllSet", "$bitsAllClear", "$bitsAnySet", "$bitsAnyClear")
FIELD_OPERATORS = (*COMPARISON, *LISTS, "$not", "$exists", "$type", "$elemMatch", "$size", "$regex")
FIELD_OPERATORS += ("$options", "$mod", *BITS)
TYPE_ALIASES = frozenset(
    [
        "double",
        "string",
        "object",
        "array",
        "binData",
        "undefined",
        "objectId",
        "bool",
        "date",
        "null",
        "regex",
        "dbPointer",
        "javascript",
        "symbol",
        "javascriptWithScope",
        "int",
        "timestamp",
        "long",
        "decimal",
        "minKey",
        "maxKey",
        "number",
    ]
)
TYPE_CODES = frozenset({*range(1, 20), -1, 127})
# Extended JSON's type wrappers, by their keys: a value, not an operator.
WRAPPERS = {
    frozenset(k)
    for k in (
        ("$oid",), ("$date",), ("$numberInt",), ("$numberLong",), ("$numberDouble",), ("$numberDecimal",),
        ("$binary",), ("$binary", "$type"), ("$uuid",), ("$regularExpression",), ("$timestamp",),
        ("$minKey",), ("$maxKey",), ("$symbol",), ("$code",), ("$code", "$scope"), ("$dbPointer",),
        ("$undefined",),
    )
}  # fmt: skip


def parse_query_document(text: str) -> QueryDocument:
    """The checked query document of `text`, or a ConditionError saying what is wrong."""
    try:
        raw = json.loads(
            text,
            object_pairs_hook=_no_repeats,
            parse_int=_integer,
            parse_float=_fraction,
            parse_constant=_constant,
        )
    except RecursionError:
        raise ConditionError(f"the query document is nested more than {MAX_DEPTH} deep") from None
    except json.JSONDecodeError as exc:
        raise ConditionError(f"not a JSON query document: {exc.msg} at offset {exc.pos}") from None
    if not isinstance(raw, dict):
        raise ConditionError("a query document is a JSON object")
    return QueryDocument(text, _query(raw, 1))


def _no_repeats(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    found: dict[str, Any] = {}
    for key, value in pairs:
        if key in found:
            raise ConditionError(f"{key!r} appears twice in one object of the query document")
        found[key] = value
    return found


def _bounded(text: str) -> Decimal:
    try:
        return bounded_number(text)
    except LiteralError as exc:
        raise ConditionError(str(exc)) from None


def _integer(text: str) -> int | float:
    value = int(_bounded(text))
    return value if -(1 << 63) <= value < 1 << 63 else float(value)


def _fraction(text: str) -> float:
    return float(_bounded(text))


def _constant(name: str) -> Any:
    raise ConditionError(f'{name} is not JSON; write {{"$numberDouble": "{name}"}}')


def _deeper(depth: int) -> int:
    if depth >= MAX_DEPTH:
        raise ConditionError(f"the query document is nested more than {MAX_DEPTH} deep")
    return depth + 1


def _path(key: str) -> str:
    if not key or "\0" in key or any(not part or part.startswith("$") for part in key.split(".")):
        raise ConditionError(
            f"field {key!r}: a field path has no empty part and no part starting with '$' (those are operators)"
        )
    return key


def _refuse_operator(name: str, where: str) -> ConditionError:
    if name in CODE:
        return ConditionError(f"{name} is not allowed in a filter: it {CODE[name]}")
    allowed = ", ".join((*LOGICAL, *FIELD_OPERATORS))
    return ConditionError(f"{name} is not an allowed operator {where} (allowed: {allowed})")


def _query(doc: dict[str, Any], depth: int) -> dict[str, Any]:
    """A query: field conditions and `$and`/`$or`/`$nor`."""
    out: dict[str, Any] = {}
    for key, value in doc.items():
        if key in LOGICAL:
            if not isinstance(value, list) or not value or not all(isinstance(v, dict) for v in value):
                raise ConditionError(f"{key} takes a non-empty array of query documents")
            out[key] = [_query(v, _deeper(depth)) for v in _capped(value, key)]
        elif key.startswith("$"):
            where = "at the top of a query" if key in FIELD_OPERATORS else "in a query"
            if key in FIELD_OPERATORS:
                raise ConditionError(
                    f'{key} is a field\'s operator: write it under a field, as in {{"qty": {{"{key}": ...}}}}'
                )
            raise _refuse_operator(key, where)
        else:
            out[_path(key)] = _field_condition(value, _deeper(depth))
    return out


def _is_operators(value: Any) -> bool:
    return (
        isinstance(value, dict)
        and bool(value)
        and frozenset(value) not in WRAPPERS
        and any(k.startswith("$") for k in value)
    )


def _field_condition(value: Any, depth: int) -> Any:
    if _is_operators(value):
        if not all(k.startswith("$") for k in value):
            raise ConditionError(
                f"an object mixes operators and field names ({', '.join(map(repr, value))}): a field's "
                "condition is either operators or a value"
            )
        return _operators(value, depth)
    return _value(value, depth)


def _operators(ops: dict[str, Any], depth: int) -> dict[str, Any]:
    if "$options" in ops and "$regex" not in ops:
        raise ConditionError("$options goes with $regex")
    out: dict[str, Any] = {}
    for op, arg in ops.items():
        if op not in FIELD_OPERATORS:
            raise _refuse_operator(op, "on a field")
        out[op] = _operand(op, arg, _deeper(depth))
    return out


def _operand(op: str, arg: Any, depth: int) -> Any:
    if op in COMPARISON:
        return _value(arg, depth)
    if op in LISTS:
        if not isinstance(arg, list):
            raise ConditionError(f"{op} takes an array")
        return [_value(v, depth) for v in _capped(arg, op)]
    if op == "$exists":
        if not isinstance(arg, bool | int):
            raise ConditionError("$exists takes true or false")
        return bool(arg)
    if op == "$type":
        kinds = arg if isinstance(arg, list) else [arg]
        if not kinds or not all(_is_type(k) for k in kinds):
            raise ConditionError(f"$type takes BSON type aliases or codes, not {str(arg)[:60]}")
        return arg
    if op == "$size":
        if isinstance(arg, bool) or not isinstance(arg, int) or arg < 0:
            raise ConditionError("$size takes a non-negative integer")
        return arg
    if op == "$mod":
        if not (isinstance(arg, list) and len(arg) == 2 and all(_is_number(v) for v in arg)) or arg[0] == 0:
            raise ConditionError("$mod takes [divisor, remainder], two numbers, the divisor not 0")
        return arg
    if op == "$regex":
        value = _value(arg, depth) if isinstance(arg, dict) else arg
        if not isinstance(value, str | RegexLiteral):
            raise ConditionError("$regex takes a pattern (a string or a regular expression)")
        return value
    if op == "$options":
        if not isinstance(arg, str) or set(arg) - set("imxsu"):
            raise ConditionError("$options takes regex options from i, m, x, s, u")
        return arg
    if op == "$not":
        value = _field_condition(arg, depth) if isinstance(arg, dict) else arg
        if not (isinstance(value, RegexLiteral) or (isinstance(value, dict) and _is_operators(arg))):
            raise ConditionError('$not takes operators ({"$gt": 5}) or a regular expression')
        return value
    if op == "$elemMatch":
        if not isinstance(arg, dict) or not arg:
            raise ConditionError("$elemMatch takes a query or operators")
        if any(k in LOGICAL for k in arg) or not all(k.startswith("$") for k in arg):
            return _query(arg, depth)  # on documents: {"$elemMatch": {"sku": "a", "qty": {"$gt": 1}}}
        return _operators(arg, depth)  # on values: {"$elemMatch": {"$gte": 80, "$lt": 85}}
    # the bitwise operators: a bitmask, bit positions or binary data
    if isinstance(arg, dict):
        value = _value(arg, depth)
        if isinstance(value, BinaryLiteral) or (isinstance(value, int) and value >= 0):
            return value
    elif _is_bits(arg) or (isinstance(arg, list) and len(arg) <= MAX_IN_LIST and all(map(_is_bits, arg))):
        return arg
    raise ConditionError(f"{op} takes a non-negative bitmask, an array of bit positions or binary data")


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _is_bits(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def _is_type(value: Any) -> bool:
    if isinstance(value, str):
        return value in TYPE_ALIASES
    return isinstance(value, int | float) and not isinstance(value, bool) and value in TYPE_CODES


def _capped(values: list[Any], op: str) -> list[Any]:
    if len(values) > MAX_IN_LIST:
        raise ConditionError(f"{op} is limited to {MAX_IN_LIST} values")
    return values


def _value(value: Any, depth: int) -> Any:
    """A value to compare with: JSON's, an embedded document or array of values, or an
    Extended JSON value."""
    if value is None or isinstance(value, bool | int | float | str):
        return value
    if isinstance(value, list):
        return [_value(v, _deeper(depth)) for v in _capped(value, "an array")]
    if frozenset(value) in WRAPPERS:
        try:
            return extended_json(value)
        except (LiteralError, ValueError, TypeError, KeyError, binascii.Error) as exc:
            raise ConditionError(f"{json.dumps(value)[:80]} is not an Extended JSON value: {exc}") from None
    out = {}
    for key, item in value.items():
        if not key or key.startswith("$") or "\0" in key:
            raise ConditionError(
                f"an embedded document's field {key!r}: a field name is not empty and does not start with '$'"
            )
        out[key] = _value(item, _deeper(depth))
    return out
