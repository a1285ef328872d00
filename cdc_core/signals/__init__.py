"""Signals: channels (signal table, Kafka topic, file) and the actions they carry, validated."""
