"""A VTGate test double: Vitess 21's VStream gRPC service (from Vitess's own protos) and
VTGate's MySQL protocol with shard targeting, backed by real MariaDB servers acting as
the shards' primaries (`python -m scripts.services up vitess`). No Vitess runs on the
project's machines; the Vitess connector is tested against this, driven only through
grpcio and pymysql as it would drive a real VTGate.

The process (`python -m tests.support.vtgate`, `server.py`):
    vstream.py       VTGate's merging layer: VGTIDs, response framing, reshards, heartbeats
    request.py       the request's VGTID resolved against the topology, with Vitess's errors
    tablet.py        one shard's tablet stream: current / position / copy, then the binlog
    copy_phase.py    the copy phase (snapshots, batches, lastpk, catch-up, fast-forward)
    shard_stream.py  one shard's binlog as a vstreamer's tablet batches
    statements.py    binlog Query events: DDL, OTHER or nothing
    fields.py        FIELD columns (query.Field) as a tablet's schema engine gives them
    values.py        cells as Vitess 21 writes them, binlog phase and copy phase
    positions.py     MariaDB-flavor positions; rules.py filters; errors.py gRPC errors
    mysql_router.py, mysql_packets.py   the MySQL protocol endpoint
    heartbeats.py    the tablets' `_vt.heartbeat` writer; topology.py the topology file
For tests: cluster.py (run it, keyspaces, routed writes, reshards: resharding.py,
writes.py, vindex.py) and fixture.py (pytest fixture `vitess`); real.py puts a real
VTGate behind the same API."""
