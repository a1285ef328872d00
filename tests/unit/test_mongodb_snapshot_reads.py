"""`mongodb.snapshot.read.preference` and its tag sets: MongoDB's modes in any case, tag
sets as the driver takes them, `primary` by default, and what cannot be meant refused with
the property named."""

from __future__ import annotations

import pytest
from pymongo import read_preferences

from cdc_core.config.connector_config import load_config
from cdc_core.connectors.mongodb.snapshot_reads import read_preference
from cdc_core.errors import ConfigError

CONNECTOR = """
name: shop
connector.class: mongodb
topic.prefix: shop
mongodb.connection.string: mongodb://127.0.0.1:27017/?replicaSet=rs0&readPreference=secondary
"""


def load(tmp_path, extra: str = ""):
    path = tmp_path / "c.yaml"
    path.write_text(CONNECTOR + extra)
    return load_config(path, environ={})


def test_snapshot_reads_go_to_the_primary_unless_told_whatever_the_connection_string_says(tmp_path):
    assert read_preference(load(tmp_path)) == read_preferences.Primary()


@pytest.mark.parametrize(
    ("written", "wanted"),
    [
        ("secondaryPreferred", read_preferences.SecondaryPreferred()),
        ("SECONDARY", read_preferences.Secondary()),
        ("primarypreferred", read_preferences.PrimaryPreferred()),
        ("nearest", read_preferences.Nearest()),
        ("primary", read_preferences.Primary()),
    ],
)
def test_mongodbs_modes_are_taken_in_any_case(tmp_path, written, wanted):
    assert read_preference(load(tmp_path, f"mongodb.snapshot.read.preference: {written}\n")) == wanted


def test_tag_sets_pick_the_members_in_order(tmp_path):
    config = load(
        tmp_path,
        "mongodb.snapshot.read.preference: secondary\n"
        'mongodb.snapshot.read.preference.tags: \'[{"dc": "east", "use": "reports"}, {}]\'\n',
    )
    assert read_preference(config) == read_preferences.Secondary(
        tag_sets=[{"dc": "east", "use": "reports"}, {}]
    )


@pytest.mark.parametrize(
    ("extra", "why"),
    [
        (
            "mongodb.snapshot.read.preference: secondaries\n",
            "mongodb.snapshot.read.preference: expected one of primary, ",
        ),
        ("mongodb.snapshot.read.preference.tags: dc:east\n", "tags: not JSON"),
        (
            "mongodb.snapshot.read.preference.tags: '[]'\n",
            "tags: expected a non-empty JSON array of tag sets",
        ),
        (
            "mongodb.snapshot.read.preference.tags: '[{\"n\": 1}]'\n",
            "tags: a tag set is an object of strings",
        ),
        (
            'mongodb.snapshot.read.preference.tags: \'{"dc": "east"}\'\n',
            "tags: expected a non-empty JSON array",
        ),
    ],
)
def test_what_is_not_a_read_preference_is_refused_at_load(tmp_path, extra, why):
    with pytest.raises(ConfigError, match=why):
        load(tmp_path, extra)


def test_tag_sets_with_the_primary_are_refused_naming_both_properties(tmp_path):
    config = load(tmp_path, 'mongodb.snapshot.read.preference.tags: \'[{"dc": "east"}]\'\n')
    with pytest.raises(
        ConfigError, match=r"tags: tag sets pick secondaries; mongodb.snapshot.read.preference is primary"
    ):
        read_preference(config)
