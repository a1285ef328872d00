-- The signal table of the Vitess connector (docker/connectors/vitess.yaml): on every shard
-- of the keyspace, so each shard's log can carry its own snapshot watermarks.
CREATE TABLE IF NOT EXISTS debezium_signal (
  id VARCHAR(42) NOT NULL PRIMARY KEY,
  type VARCHAR(32) NOT NULL,
  data VARCHAR(2048) NULL
);
