"""Reproducible benchmarks: each prints its figures next to the baseline its issue names,
measured in the same run, as ratios. `make bench` runs them all."""
