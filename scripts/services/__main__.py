"""`python -m scripts.services ...` (the Makefile's `make up`, `make down`, ...): the CLI
of `cli`, whose return value is the exit code."""

import sys

from scripts.services.cli import main

if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
