"""The Python floor for the streamer benchmark: python-mysql-replication iterating rows
and nothing else. Run as a child process so its peak RSS is its own.

    python -m bench.bare_binlog_loop START_GTID SCHEMA EXPECTED_ROWS

Connection settings come from the environment (TIDEMARK_MARIADB_PORT, TIDEMARK_DB_USER,
TIDEMARK_DB_PASSWORD), so the password never shows in a process listing. MariaDB is read
from a GTID position: python-mysql-replication ignores file/position for MariaDB and
would stream from the first binlog file.
"""

from __future__ import annotations

import os
import resource
import sys
import time

from pymysqlreplication import BinLogStreamReader
from pymysqlreplication.row_event import DeleteRowsEvent, UpdateRowsEvent, WriteRowsEvent


def main(argv: list[str]) -> int:
    start_gtid, schema, expected = argv[0], argv[1], int(argv[2])
    stream = BinLogStreamReader(
        connection_settings={
            "host": "127.0.0.1",
            "port": int(os.environ.get("TIDEMARK_MARIADB_PORT", "3307")),
            "user": os.environ.get("TIDEMARK_DB_USER", "tidemark"),
            "password": os.environ["TIDEMARK_DB_PASSWORD"],
        },
        server_id=9911,
        auto_position=start_gtid,
        blocking=True,
        only_events=[WriteRowsEvent, UpdateRowsEvent, DeleteRowsEvent],
        is_mariadb=True,
        only_schemas=[schema],
    )
    started = time.perf_counter()
    rows = 0
    for event in stream:
        for _ in event.rows:
            rows += 1
        if rows >= expected:
            break
    seconds = time.perf_counter() - started
    stream.close()
    print(rows, seconds, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
