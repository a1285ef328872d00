"""The column rules as Spark expressions (`spark_jobs/staged_rules.py`) give exactly what
the rule objects give in Python (`StagedForm.shape`, the events' own shaping), for every
rule, combination and algorithm Spark computes, over text and integer values that try
the edges: NULL, empty, characters beyond the BMP, extreme integers. Rules Spark cannot
compute exactly have no expression, so their tables go to the Python reader."""

from __future__ import annotations

import datetime as dt
from itertools import cycle, islice

import pytest

from cdc_core.filters import ColumnRules
from cdc_core.schema.model import Column, TableId, TableSchema
from cdc_core.snapshot.staged_form import StagedForm
from tests.unit.test_dispatcher import FakeSource, config

pytestmark = [pytest.mark.integration, pytest.mark.timeout(900)]

TEXTS = [
    None,
    "",
    "a",
    "abc",
    "abcd",
    "Annabel 🐚 ünïcode",
    "🐚🐚🐚🐚",
    "x" * 300,
    " padded ",
    "tab\tnew\nline",
]
INTS = [None, 0, -1, 7, 2147483647, -2147483648]
# column: (MySQL type, Spark type, values, rules on it)
COLUMNS = {
    "id": ("INT", "INT", None, ""),
    "t_trunc": ("VARCHAR", "STRING", TEXTS, "truncate3"),
    "t_trunc0": ("VARCHAR", "STRING", TEXTS, "truncate0"),
    "t_mask": ("VARCHAR", "STRING", TEXTS, "mask5"),
    "t_md5": ("VARCHAR", "STRING", TEXTS, "md5"),
    "t_sha1": ("TEXT", "STRING", TEXTS, "sha1"),
    "t_sha224": ("VARCHAR", "STRING", TEXTS, "sha224"),
    "t_sha256": ("CHAR", "STRING", TEXTS, "sha256"),
    "t_sha384": ("VARCHAR", "STRING", TEXTS, "sha384"),
    "t_sha512": ("VARCHAR", "STRING", TEXTS, "sha512"),
    "t_trunc_hash": ("VARCHAR", "STRING", TEXTS, "truncate3 sha256"),
    "t_mask_hash": ("VARCHAR", "STRING", TEXTS, "mask5 sha256"),
    "t_accent_salt": ("VARCHAR", "STRING", TEXTS, "sha256accent"),
    "e_trunc_hash": ("ENUM", "STRING", ["small", "larger", None], "truncate3 sha256"),
    "j_trunc": ("JSON", "STRING", ['{"a": [1, 2]}', None, "[]"], "truncate3"),
    "i_mask": ("INT", "INT", INTS, "mask5"),
    "i_hash": ("INT", "INT", INTS, "sha256"),
    "s_hash": ("TINYINT", "TINYINT", [None, -128, 127, 0], "md5"),
    "b_hash": ("BIGINT", "BIGINT", [None, 9223372036854775807, -9223372036854775808], "sha512"),
    "i_trunc": ("INT", "INT", INTS, "truncate3"),  # truncation leaves a number alone
    "d_mask": ("DATE", "DATE", [None, dt.date(1999, 12, 31)], "mask5"),
}
# Rules Spark cannot compute exactly: the event form is not the value Spark reads, or
# Spark has no such hash function.
PYTHON_ONLY = {
    "d_hash": ("DATE", "sha256"),
    "u_hash": ("BIGINT UNSIGNED", "sha256"),
    "t_blake2": ("VARCHAR", "blake2"),
}
PATTERNS = {
    "truncate3": "column.truncate.to.3.chars",
    "truncate0": "column.truncate.to.0.chars",
    "mask5": "column.mask.with.5.chars",
    "md5": "column.mask.hash.MD5.with.salt.pepper",
    "sha1": "column.mask.hash.SHA-1.with.salt.pepper",
    "sha224": "column.mask.hash.SHA-224.with.salt.pepper",
    "sha256": "column.mask.hash.SHA-256.with.salt.pepper",
    "sha384": "column.mask.hash.SHA-384.with.salt.pepper",
    "sha512": "column.mask.hash.SHA-512.with.salt.pepper",
    "sha256accent": "column.mask.hash.SHA-256.with.salt.pépper ✓",
    "blake2": "column.mask.hash.BLAKE2b.with.salt.pepper",
}


def rules_config(tmp_path):
    on: dict[str, list[str]] = {}
    for name, spec in [(n, c[3]) for n, c in COLUMNS.items()] + [(n, c[1]) for n, c in PYTHON_ONLY.items()]:
        for rule in spec.split():
            on.setdefault(PATTERNS[rule], []).append(name)
    lines = "".join(f"{prop}: shop.t.({'|'.join(names)})\n" for prop, names in on.items())
    return ColumnRules(config(tmp_path, lines))


def column(name: str, mysql_type: str) -> Column:
    kind, _, unsigned = mysql_type.partition(" ")
    values = ("small", "larger") if kind == "ENUM" else ()
    return Column(name, kind, unsigned=bool(unsigned), enum_values=values)


def test_every_rule_spark_computes_equals_the_rule_objects(spark, tmp_path):
    from spark_jobs.staged_rules import staged_expressions

    schema = TableSchema(
        TableId("shop", "t"),
        tuple(column(n, c[0]) for n, c in COLUMNS.items())
        + tuple(column(n, c[0]) for n, c in PYTHON_ONLY.items()),
        ("id",),
    )
    form = StagedForm(schema, rules_config(tmp_path), FakeSource().type_mapper(), ("id",))
    expressions, unsupported = staged_expressions(form)
    assert sorted(u.split(" ")[0] for u in unsupported) == sorted(PYTHON_ONLY)
    assert set(expressions) == set(COLUMNS) - {"id", "i_trunc"} == set(form.shaped) - set(PYTHON_ONLY)

    count = 40
    data = [list(range(count))] + [list(islice(cycle(c[2]), count)) for c in list(COLUMNS.values())[1:]]
    rows = [tuple(r) for r in zip(*data, strict=True)]
    ddl = ", ".join(f"{n} {c[1]}" for n, c in COLUMNS.items())
    frame = spark.createDataFrame(rows, ddl)
    names = [n for n in COLUMNS if n in expressions]
    got = [tuple(r) for r in frame.select("id", *[expressions[n] for n in names]).orderBy("id").collect()]

    # Python: the rule objects over the same values, as `StagedForm.shape` stages them.
    staged_names = [c for c in form.columns if c in COLUMNS]
    expected = []
    for r in rows:
        full = dict(zip(COLUMNS, r, strict=True))
        shaped = dict(zip(form.columns, form.shape([full.get(c) for c in schema.column_names]), strict=True))
        expected.append((r[0], *[shaped[n] for n in names]))
    assert staged_names and got == expected
    assert any(v is None for row in got for v in row[1:]) and all(
        isinstance(v, str) for row in got for v in row[1:] if v is not None
    )
