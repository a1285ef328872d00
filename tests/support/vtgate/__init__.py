"""A VTGate test double: Vitess's VStream gRPC service (from Vitess's own protos) and
VTGate's MySQL protocol with shard targeting, backed by real MariaDB servers acting as
the shards' primaries (`python -m scripts.services up vitess`). No Vitess runs on the
project's machines; the Vitess connector is tested against this, driven only through
grpcio and pymysql as it would drive a real VTGate. See `server.py`."""
