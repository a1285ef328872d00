"""`python -m bench [NAME [ARGS ...]]`: run one benchmark with its arguments, or all of them."""

from __future__ import annotations

import importlib
import sys

BENCHMARKS = {
    "streamer": "bench.streamer_throughput",
    "snapshot": "bench.snapshot_throughput",
    "merge": "bench.merge_throughput",
    "vitess": "bench.vitess_throughput",
    "mongodb": "bench.mongodb_throughput",
    "mongodb-landing": "bench.mongodb_landing",
}


def main(argv: list[str]) -> int:
    import os

    from scripts.services import environment

    for key, value in environment().items():  # the local stack's ports and dev credentials
        os.environ.setdefault(key, value)
    runs = [(argv[0], argv[1:])] if argv else [(name, []) for name in BENCHMARKS]
    for name, args in runs:
        if name not in BENCHMARKS:
            print(f"unknown benchmark {name!r}; known: {', '.join(BENCHMARKS)}", file=sys.stderr)
            return 2
        print(f"=== {name} ===", flush=True)
        code = importlib.import_module(BENCHMARKS[name]).main(args)
        if code:
            return code
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
