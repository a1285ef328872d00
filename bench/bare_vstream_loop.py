"""The Python floor for the Vitess benchmark: a grpcio VStream call iterated, counting
row changes and nothing else. Run as a child process so its peak RSS is its own.

    python -m bench.bare_vstream_loop VTGATE_ADDRESS VGTID_JSON EXPECTED_ROWS
"""

from __future__ import annotations

import json
import resource
import sys
import time

import grpc

from cdc_core.connectors.vitess.generated import (
    binlogdata_pb2,
    topodata_pb2,
    vtgate_pb2,
    vtgateservice_pb2_grpc,
)


def main(argv: list[str]) -> int:
    address, vgtid, expected = argv[0], json.loads(argv[1]), int(argv[2])
    request = vtgate_pb2.VStreamRequest(
        tablet_type=topodata_pb2.PRIMARY,
        vgtid=binlogdata_pb2.VGtid(
            shard_gtids=[
                binlogdata_pb2.ShardGtid(keyspace=s["keyspace"], shard=s["shard"], gtid=s["gtid"])
                for s in vgtid
            ]
        ),
        filter=binlogdata_pb2.Filter(rules=[binlogdata_pb2.Rule(match="/.*")]),
    )
    channel = grpc.insecure_channel(address, options=[("grpc.max_receive_message_length", 64 << 20)])
    call = vtgateservice_pb2_grpc.VitessStub(channel).VStream(request)
    started = time.perf_counter()
    rows = 0
    row = binlogdata_pb2.ROW
    for response in call:
        for event in response.events:
            if event.type == row:
                rows += len(event.row_event.row_changes)
        if rows >= expected:
            break
    seconds = time.perf_counter() - started
    call.cancel()
    print(rows, seconds, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
