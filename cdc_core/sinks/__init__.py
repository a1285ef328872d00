"""Where records go: Kafka, or the embedded local event log. A record counts as delivered
only when the sink acknowledges it; offsets follow acknowledgements, never sends."""
