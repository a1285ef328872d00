"""The Python floor for the streamer benchmark: python-mysql-replication iterating rows
and nothing else. Run as a child process so its peak RSS is its own.

    python -m bench.bare_binlog_loop PARAMS_JSON FILE POS END_FILE END_POS SCHEMA
"""

from __future__ import annotations

import json
import resource
import sys
import time

from pymysqlreplication import BinLogStreamReader
from pymysqlreplication.row_event import DeleteRowsEvent, UpdateRowsEvent, WriteRowsEvent


def main(argv: list[str]) -> int:
    params, file, pos, end_file, end_pos, schema = (
        json.loads(argv[0]),
        argv[1],
        int(argv[2]),
        argv[3],
        int(argv[4]),
        argv[5],
    )
    stream = BinLogStreamReader(
        connection_settings=params,
        server_id=9911,
        log_file=file,
        log_pos=pos,
        resume_stream=True,
        blocking=False,
        only_events=[WriteRowsEvent, UpdateRowsEvent, DeleteRowsEvent],
        is_mariadb=True,
        only_schemas=[schema],
    )
    started = time.perf_counter()
    rows = 0
    for event in stream:
        for _ in event.rows:
            rows += 1
        if (stream.log_file, stream.log_pos) >= (end_file, end_pos):
            break
    seconds = time.perf_counter() - started
    stream.close()
    print(rows, seconds, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
