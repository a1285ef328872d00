"""A table's truncation mark as its Delta property keeps it: versioned JSON, read back
from the text an earlier merge wrote, and refused (with the property named) when a newer
format is met rather than misread."""

from __future__ import annotations

import pytest

from cdc_core.errors import TidemarkError
from spark_jobs.merge.truncation import PROPERTY, Mark

# As the first release that kept marks wrote it (frozen: later releases must read it).
FROZEN = '{"version": 1, "order": [0, 47309, 1], "ts_ms": 1795798576000, "txn_id": "0-1-47309"}'


def test_a_frozen_mark_reads_back_and_orders_by_its_order_key():
    mark = Mark.from_json(FROZEN)
    assert mark == Mark((0, 47309, 1), 1795798576000, "0-1-47309")
    assert Mark.from_json(mark.to_json()) == mark
    assert Mark((0, 47309, 1)) < Mark((0, 47309, 2)) < Mark((1, 0, 1))


def test_a_mark_of_an_unknown_version_is_refused_naming_the_property():
    with pytest.raises(TidemarkError, match=PROPERTY):
        Mark.from_json('{"version": 2, "order": [0, 1, 1]}')
