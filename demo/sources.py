"""The demo's two sources: the shop on the local MariaDB (`connectors/demo.yaml`), and the
same shop on a two-shard Vitess keyspace behind the VTGate double
(`connectors/demo_vitess.yaml`). Everything else of the demo is the same for both: the
Airflow DAGs, the workload, the snapshot form, the merge and the comparison."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cdc_core.cli import status_document
from cdc_core.config.connector_config import ConnectorConfig
from demo.workload import create_schema

ROOT = Path(__file__).resolve().parent.parent
DATABASE = "demo_shop"
TABLES = ("customers", "order_lines", "orders", "products")


def _committed_source(config: ConnectorConfig) -> dict[str, Any]:
    offset = status_document(config, check_source=False).get("committed_offset") or {}
    return offset.get("source") or {}


@dataclass(frozen=True)
class MariaDbDemo:
    """The shop on the local stack's MariaDB."""

    name = "mysql"
    connector_file = ROOT / "connectors" / "demo.yaml"
    services = ("mariadb",)

    def connect(self) -> Any:
        from scripts import services

        return services.admin_connection()

    def reset(self, conn: Any) -> None:
        create_schema(conn, DATABASE)

    def head(self, conn: Any) -> str:
        with conn.cursor() as cur:
            cur.execute("SELECT @@gtid_binlog_pos")
            return str(cur.fetchone()[0])

    def caught_up(self, config: ConnectorConfig, head: str) -> bool:
        from cdc_core.connectors.mysql.positions import MariaDbGtidState

        committed = _committed_source(config).get("gtids")
        return bool(committed) and MariaDbGtidState.parse(committed).succeeds(MariaDbGtidState.parse(head))


@dataclass(frozen=True)
class VitessDemo:
    """The shop on keyspace `demo_shop`, shards -80 and 80- (the first two `vitess` shard
    servers), behind the `vtgate` service; writes routed as `demo/sharded.py` says."""

    name = "vitess"
    connector_file = ROOT / "connectors" / "demo_vitess.yaml"
    services = ("vitess", "vtgate")
    layout = (("-80", 0), ("80-", 1))

    def _shards(self) -> list[Any]:
        from scripts import services
        from tests.support.vtgate.topology import Shard

        ports = [s.port for s in services.SERVICES["vitess"].shards]  # type: ignore[attr-defined]
        return [Shard(name, "127.0.0.1", ports[index]) for name, index in self.layout]

    def connect(self) -> Any:
        import pymysql

        from demo.sharded import ShardedConnection
        from scripts import services

        env = services.environment()
        login = {"user": services.ADMIN_USER, "password": env[services.ADMIN_PASSWORD_ENV]}
        return ShardedConnection(
            {
                s.name: pymysql.connect(
                    host=s.host,
                    port=s.port,
                    **login,
                    autocommit=True,
                    init_command="SET time_zone = '+00:00'",
                )
                for s in self._shards()
            }
        )

    def reset(self, conn: Any) -> None:
        """The keyspace recreated empty on its shards (with its signal table) and put in
        the double's topology."""
        from scripts import services
        from tests.support.vtgate.topology import Topology

        create_schema(conn, DATABASE)
        with conn.cursor() as cur:
            cur.execute(
                f"CREATE TABLE `{DATABASE}`.debezium_signal (id VARCHAR(42) PRIMARY KEY, "
                "type VARCHAR(32) NOT NULL, data VARCHAR(2048) NULL)"
            )
        topology = Topology(services.SERVICES["vtgate"].topology)  # type: ignore[attr-defined]
        keyspaces = topology.load()
        keyspaces[DATABASE] = self._shards()
        topology.save(keyspaces)

    def head(self, conn: Any) -> dict[str, str]:
        """Each shard's GTID position."""
        heads = {}
        for name, shard in conn.shards.items():
            with shard.cursor() as cur:
                cur.execute("SELECT @@global.gtid_binlog_pos")
                heads[name] = f"MariaDB/{cur.fetchone()[0]}"
        return heads

    def caught_up(self, config: ConnectorConfig, head: dict[str, str]) -> bool:
        from cdc_core.connectors.vitess.positions import is_real, parse_position
        from cdc_core.connectors.vitess.vgtid import Vgtid

        text = _committed_source(config).get("vgtid")
        if not text:
            return False
        committed = Vgtid.from_json(text)
        for shard, position in head.items():
            entry = committed.shard(shard)
            if entry is None or not is_real(entry.gtid):
                return False
            have = parse_position(entry.gtid).sequences
            if any(have.get(domain, -1) < seq for domain, seq in parse_position(position).sequences.items()):
                return False
        return True


SOURCES = {s.name: s for s in (MariaDbDemo(), VitessDemo())}
