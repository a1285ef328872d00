"""Where a connector's committed offset lives: a local file (embedded default) or a
compacted Kafka topic (production)."""
