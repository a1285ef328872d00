"""MySQL/MariaDB connector: binlog reader, DDL parser, type mapping, chunk dialect."""
