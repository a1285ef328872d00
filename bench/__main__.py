"""`python -m bench [NAME ...]`: run the named benchmarks (default: all)."""

from __future__ import annotations

import importlib
import sys

BENCHMARKS = {
    "streamer": "bench.streamer_throughput",
}


def main(argv: list[str]) -> int:
    import os

    from scripts.services import environment

    for key, value in environment().items():  # the local stack's ports and dev credentials
        os.environ.setdefault(key, value)
    names = argv or list(BENCHMARKS)
    unknown = [n for n in names if n not in BENCHMARKS]
    if unknown:
        print(f"unknown benchmark(s) {unknown}; known: {', '.join(BENCHMARKS)}", file=sys.stderr)
        return 2
    for name in names:
        print(f"=== {name} ===", flush=True)
        code = importlib.import_module(BENCHMARKS[name]).main([])
        if code:
            return code
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
