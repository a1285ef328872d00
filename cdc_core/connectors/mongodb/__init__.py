"""MongoDB connector: change streams through pymongo, documents as Debezium's MongoDB connector writes them, incremental snapshots by `_id` chunks."""
