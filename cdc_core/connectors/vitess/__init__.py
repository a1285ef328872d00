"""Vitess connector: VStream over gRPC (VGTID positions, copy phase), the type mapping of seed 004, chunk reads per shard through VTGate."""
