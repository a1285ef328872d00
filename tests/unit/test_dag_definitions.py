"""The product's DAGs import cleanly from the connectors folder, without touching a
database or the network, and the snapshot form's JSON schema refuses bad input with
messages naming the field."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pytest

from scripts import services

PROBE = textwrap.dedent(
    """
    import json, socket, sys
    def refuse(*args, **kwargs):
        raise AssertionError(f"network access while importing DAGs: {args}")
    socket.socket.connect = refuse
    socket.create_connection = refuse
    from airflow.dag_processing.dagbag import DagBag
    bag = DagBag(dag_folder=sys.argv[1], bundle_name="dags-folder")
    print(json.dumps({"errors": {k: str(v) for k, v in bag.import_errors.items()}, "dags": sorted(bag.dag_ids)}))
    """
)


def import_dags(env_changes: dict[str, str]) -> dict:
    env = {**services.environment(), **env_changes}
    # No database: a metadata database path that cannot exist.
    env["AIRFLOW__DATABASE__SQL_ALCHEMY_CONN"] = "sqlite:////nonexistent/tidemark/airflow.db"
    out = subprocess.run(
        [sys.executable, "-c", PROBE, str(services.ROOT / "dags")],
        env=env,
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_dags_import_without_errors_database_or_network():
    result = import_dags({})
    assert result["errors"] == {}
    assert result["dags"] == [
        "tidemark_backfill_demo",
        "tidemark_backfill_demo_vitess",
        "tidemark_housekeeping",
        "tidemark_merge",
        "tidemark_snapshot",
        "tidemark_stream_demo",
        "tidemark_stream_demo_vitess",
    ]


def test_a_connector_file_with_a_mistake_is_an_import_error_naming_it(tmp_path):
    (tmp_path / "bad.yaml").write_text("name: bad\nconnector.class: mysql\ndatabase.hostnme: x\n")
    result = import_dags({"TIDEMARK_CONNECTORS_DIR": str(tmp_path)})
    assert result["errors"], "a broken connector file must show as an import error"
    assert any("database.hostnme" in e and "database.hostname" in e for e in result["errors"].values())


@pytest.fixture(scope="module")
def snapshot_params():
    from tidemark_airflow.snapshot_form import snapshot_params

    return snapshot_params(["demo", "sales"])


def check(params, conf):
    from airflow.sdk.definitions.param import ParamsDict

    merged = ParamsDict(params)
    merged.update(conf)
    return merged.validate()


BASE = {"connector": "demo", "data_collections": ["demo_shop\\.orders"]}


def test_a_complete_form_is_accepted(snapshot_params):
    resolved = check(snapshot_params, BASE)
    assert resolved["snapshot_type"] == "incremental" and resolved["chunk_size"] == 1024


@pytest.mark.parametrize(
    ("change", "named"),
    [
        ({"connector": "nope"}, "connector"),
        ({"data_collections": []}, "data_collections"),
        ({"data_collections": [""]}, "data_collections"),
        ({"snapshot_type": "full"}, "snapshot_type"),
        ({"chunk_size": 0}, "chunk_size"),
        ({"chunk_size": "100"}, "chunk_size"),
        ({"parallelism": 1000}, "parallelism"),
        ({"release_mode": "fast"}, "release_mode"),
        ({"additional_conditions": [{"data-collection": "demo_shop\\.orders"}]}, "additional_conditions"),
        (
            {"additional_conditions": [{"data-collection": "x", "filter": "id > 1", "sql": "DROP TABLE t"}]},
            "additional_conditions",
        ),
        ({"surrogate_key": ""}, "surrogate_key"),
        ({"data_collections": ["demo_shop\\.(orders"]}, "data_collections"),  # not a regex
        ({"data_collections": ["a", "a"]}, "data_collections"),
        (
            {"additional_conditions": [{"data-collection": "demo_shop\\.[", "filter": "id > 1"}]},
            "additional_conditions",
        ),
    ],
)
def test_bad_input_is_refused_naming_the_field(snapshot_params, change, named):
    from airflow.sdk.exceptions import ParamValidationError

    with pytest.raises(ParamValidationError) as err:
        check(snapshot_params, {**BASE, **change})
    assert named in str(err.value)


def test_the_rest_api_refuses_what_the_form_schema_refuses_before_a_run_exists(snapshot_params):
    """`POST /api/v2/dags/tidemark_snapshot/dagRuns` validates `conf` against the serialized
    DAG's params (`create_dagrun`): a bad field is a 400 naming it, and no run is created."""
    from airflow.sdk import DAG
    from airflow.serialization.serialized_objects import DagSerialization

    with DAG("form", schedule=None, params=snapshot_params) as dag:
        pass
    served = DagSerialization.deserialize_dag(DagSerialization.serialize_dag(dag)).params
    served.deep_merge({**BASE, "chunk_size": 10}).validate()
    for change, named in (
        ({"data_collections": ["x("]}, "data_collections"),
        ({"chunk_size": 0}, "chunk_size"),
    ):
        with pytest.raises(Exception, match=named):
            served.deep_merge({**BASE, **change}).validate()


def test_a_misspelt_field_is_refused_instead_of_ignored():
    from tidemark_airflow.snapshot_form import build_request

    from cdc_core.errors import TidemarkError

    with pytest.raises(TidemarkError, match="unknown form field.*chunk_sise.*chunk_size"):
        build_request(object(), {**BASE, "chunk_sise": 10})


def test_the_signal_a_form_sends():
    from tidemark_airflow.snapshot_form import signal_data

    form = {
        **BASE,
        "snapshot_type": "incremental",
        "chunk_size": 500,
        "release_mode": "stream",
        "additional_conditions": [{"data-collection": "demo_shop\\.orders", "filter": "status = 'paid'"}],
        "surrogate_key": None,
    }
    assert signal_data(form) == {
        "data-collections": ["demo_shop\\.orders"],
        "type": "incremental",
        "tidemark.chunk-size": 500,
        "tidemark.reader": "spark",
        "tidemark.release": "stream",
        "additional-conditions": [{"data-collection": "demo_shop\\.orders", "filter": "status = 'paid'"}],
    }
    blocking = signal_data({**form, "snapshot_type": "blocking"})
    assert "tidemark.reader" not in blocking and blocking["type"] == "blocking"


def test_backfill_form_selects_the_data_interval():
    import pendulum
    from tidemark_airflow.snapshot_form import backfill_form

    from cdc_core.signals.conditions import parse_condition

    form = backfill_form(
        ["shop.orders:placed_at", "shop.lines:créé-le"],
        pendulum.datetime(2026, 11, 1, tz="UTC"),
        pendulum.datetime(2026, 11, 2, tz="UTC"),
    )
    assert form["data_collections"] == ["shop\\.orders", "shop\\.lines"]
    assert form["additional_conditions"][0] == {
        "data-collection": "shop\\.orders",
        "filter": "`placed_at` >= '2026-11-01 00:00:00' AND `placed_at` < '2026-11-02 00:00:00'",
    }
    # any column name the config takes reads back as that column
    parse_condition(form["additional_conditions"][1]["filter"], ["créé-le"])


def test_a_vitess_connector_file_gets_its_streamer_and_backfill_dags(tmp_path):
    """DAGs are generated from any connector's file, Vitess's as MySQL's (nothing in them
    knows a source); its properties are validated on import."""
    (tmp_path / "shop.yaml").write_text(
        "name: vshop\nconnector.class: vitess\ntopic.prefix: vshop\ndatabase.hostname: 127.0.0.1\n"
        "database.user: tidemark\nvitess.keyspace: commerce\nsignal.data.collection: commerce.debezium_signal\n"
        "airflow.backfill.tables: commerce.orders:placed_at\nairflow.backfill.start.date: '2026-11-01'\n"
    )
    result = import_dags({"TIDEMARK_CONNECTORS_DIR": str(tmp_path)})
    assert result["errors"] == {}
    assert {"tidemark_stream_vshop", "tidemark_backfill_vshop", "tidemark_snapshot"} <= set(result["dags"])
    (tmp_path / "shop.yaml").write_text(
        "name: vshop\nconnector.class: vitess\ntopic.prefix: vshop\ndatabase.hostname: h\ndatabase.user: u\n"
    )
    result = import_dags({"TIDEMARK_CONNECTORS_DIR": str(tmp_path)})
    assert any("vitess.keyspace" in e for e in result["errors"].values())


def test_a_mongodb_connector_file_gets_its_streamer_and_backfill_dags(tmp_path):
    (tmp_path / "docs.yaml").write_text(
        "name: docs\nconnector.class: mongodb\ntopic.prefix: docs\n"
        "mongodb.connection.string: mongodb://127.0.0.1:27017/?replicaSet=rs0\n"
        "signal.data.collection: shop.debezium_signal\n"
        "airflow.backfill.tables: shop.orders:placed_at\nairflow.backfill.start.date: '2026-11-01'\n"
    )
    result = import_dags({"TIDEMARK_CONNECTORS_DIR": str(tmp_path)})
    assert result["errors"] == {}
    assert {"tidemark_stream_docs", "tidemark_backfill_docs", "tidemark_snapshot"} <= set(result["dags"])
    (tmp_path / "docs.yaml").write_text("name: docs\nconnector.class: mongodb\ntopic.prefix: docs\n")
    result = import_dags({"TIDEMARK_CONNECTORS_DIR": str(tmp_path)})
    assert any("mongodb.connection.string" in e for e in result["errors"].values())
