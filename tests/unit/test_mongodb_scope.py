"""A MongoDB connector whose signal collection its change stream does not watch would
take signals and never see them, or open a snapshot's windows and never close them:
it is refused at start, before anything is read."""

from __future__ import annotations

import pytest

from cdc_core.config.connector_config import load_config
from cdc_core.connectors.mongodb.source import MongoSource
from cdc_core.errors import TidemarkError
from cdc_core.schema.history import SchemaHistory

CONNECTOR = """
name: shop
connector.class: mongodb
topic.prefix: shop
mongodb.connection.string: mongodb://127.0.0.1:27017
signal.data.collection: shop.signals
"""


@pytest.fixture(autouse=True)
def no_server(monkeypatch):
    def connect(*args, **kwargs):
        raise ConnectionError("connecting")

    monkeypatch.setattr("cdc_core.connectors.mongodb.source.client_for", connect)


def opened(tmp_path, scope: str):
    path = tmp_path / "c.yaml"
    path.write_text(CONNECTOR + scope)
    source = MongoSource(load_config(path, environ={}), SchemaHistory(tmp_path / "history"))
    try:
        source.open(None)
    finally:
        source.close()


@pytest.mark.parametrize(
    "scope",
    [
        "capture.scope: database\ncapture.target: crm\n",
        "capture.scope: collection\ncapture.target: shop.orders\n",
    ],
)
def test_a_signal_collection_outside_the_scope_is_refused_at_start(tmp_path, scope):
    with pytest.raises(TidemarkError, match="signal.data.collection shop.signals is outside capture.scope"):
        opened(tmp_path, scope)


@pytest.mark.parametrize("scope", ["capture.scope: database\ncapture.target: shop\n", ""])
def test_a_signal_collection_inside_the_scope_goes_on_to_connect(tmp_path, scope):
    with pytest.raises(ConnectionError, match="connecting"):
        opened(tmp_path, scope)
