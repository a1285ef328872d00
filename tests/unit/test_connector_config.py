"""Connector files: Debezium property names, validated at start, secrets never in the file."""

from __future__ import annotations

import re

import pytest

from cdc_core.config.connector_config import Secret, load_config
from cdc_core.errors import ConfigError

BASE = """
name: shop
connector.class: mysql
topic.prefix: shop
database.hostname: 127.0.0.1
database.port: 3307
database.user: tidemark
database.server.id: 5401
"""


def write(tmp_path, extra=""):
    path = tmp_path / "c.yaml"
    path.write_text(BASE + extra)
    return path


def test_defaults_and_types(tmp_path):
    config = load_config(write(tmp_path), environ={"TIDEMARK_DB_PASSWORD": "s3cret"})
    assert config.get("database.port") == 3307
    assert config.get("tombstones.on.delete") is True
    assert config.get("skipped.operations") == ["t"]
    assert config.get("decimal.handling.mode") == "precise"
    secret = config.secret("database.password")
    assert isinstance(secret, Secret) and secret.reveal() == "s3cret"
    assert "s3cret" not in repr(config) and "s3cret" not in str(secret)


def test_unknown_property_is_named_with_a_suggestion(tmp_path):
    with pytest.raises(
        ConfigError, match=r"tabel\.include\.list: unknown property \(did you mean table\.include\.list\?\)"
    ):
        load_config(write(tmp_path, "tabel.include.list: shop.orders\n"), environ={})


def test_invalid_values_name_the_property(tmp_path):
    with pytest.raises(ConfigError, match="database.port: expected an integer"):
        load_config(write(tmp_path, "database.port: lots\n"), environ={})
    with pytest.raises(ConfigError, match="decimal.handling.mode: expected one of precise, string, double"):
        load_config(write(tmp_path, "decimal.handling.mode: exact\n"), environ={})
    with pytest.raises(ConfigError, match="table.include.list: invalid regular expression"):
        load_config(write(tmp_path, "table.include.list: 'shop.(orders'\n"), environ={})
    with pytest.raises(ConfigError, match="message.key.columns"):
        load_config(write(tmp_path, "message.key.columns: 'orders:id'\n"), environ={})


def test_missing_required_property(tmp_path):
    path = tmp_path / "c.yaml"
    path.write_text(BASE.replace("database.user: tidemark\n", ""))
    with pytest.raises(ConfigError, match="database.user: is required"):
        load_config(path, environ={})


def test_password_in_the_file_is_refused_without_echoing_it(tmp_path):
    with pytest.raises(ConfigError) as info:
        load_config(write(tmp_path, "database.password: hunter2\n"), environ={})
    assert "hunter2" not in str(info.value)
    assert "TIDEMARK_DB_PASSWORD" in str(info.value)


def test_pattern_properties_and_secret_handover(tmp_path):
    config = load_config(
        write(
            tmp_path, "column.mask.with.6.chars: shop.customers.email\ncolumn.truncate.to.3.chars: shop.t.c\n"
        ),
        secrets={"database.password": "from-airflow"},
        environ={},
    )
    [(groups, patterns)] = config.family("column.mask.with.N.chars")
    assert groups == ("6",) and patterns[0].pattern == "shop.customers.email"
    assert config.secret("database.password").reveal() == "from-airflow"


def test_unknown_connector_class(tmp_path):
    path = tmp_path / "c.yaml"
    path.write_text(BASE.replace("connector.class: mysql", "connector.class: db2"))
    with pytest.raises(ConfigError, match="connector.class: unknown connector 'db2'"):
        load_config(path, environ={})


def test_a_connectors_own_name_of_a_common_property_sets_it(tmp_path):
    """MongoDB's collection.include.list is table.include.list; saying both differently is an error."""
    base = "name: m\nconnector.class: mongodb\ntopic.prefix: m\nmongodb.connection.string: mongodb://h/\n"
    path = tmp_path / "m.yaml"
    path.write_text(base + "collection.include.list: shop\\.orders\n")
    assert [p.pattern for p in load_config(path).get("table.include.list")] == ["shop\\.orders"]
    path.write_text(base + "collection.include.list: shop\\.orders\ntable.include.list: shop\\.other\n")
    with pytest.raises(ConfigError, match="collection.include.list"):
        load_config(path)
    path.write_text(base)  # and MongoDB needs no database.hostname, which is required of others
    assert load_config(path).get("database.hostname") is None


@pytest.mark.parametrize(
    ("connector", "own", "required"),
    [
        ("mysql", "database.server.id: 1\n", "database.hostname"),
        ("vitess", "vitess.keyspace: ks\ndatabase.user: u\n", "database.hostname"),
        ("mongodb", "", "mongodb.connection.string"),
    ],
)
def test_each_connector_requires_its_own_way_to_the_source(tmp_path, connector, own, required):
    """The reference and validation agree: a host for MySQL/MariaDB and Vitess, a
    connection string (and no host) for MongoDB."""
    path = tmp_path / "c.yaml"
    path.write_text(f"name: c\nconnector.class: {connector}\ntopic.prefix: c\ndatabase.user: u\n{own}")
    with pytest.raises(ConfigError, match=f"^{re.escape(required)}: is required"):
        load_config(path, environ={})
    if connector == "mongodb":
        path.write_text(path.read_text() + "mongodb.connection.string: mongodb://h:27017/?replicaSet=rs0\n")
        assert load_config(path, environ={}).get("database.hostname") is None
