"""Incremental snapshots (DBLog watermarks): windows, the snapshot context kept in the offsets, chunk planning."""
