#!/bin/bash
# First start of the MySQL container: the CDC user and the Debezium-compatible signal
# table. The password comes from the container environment (TIDEMARK_DB_PASSWORD).
set -euo pipefail
mysql -uroot -p"$MYSQL_ROOT_PASSWORD" <<SQL
CREATE DATABASE IF NOT EXISTS tidemark;
CREATE TABLE IF NOT EXISTS tidemark.debezium_signal (
  id VARCHAR(42) PRIMARY KEY,
  type VARCHAR(32) NOT NULL,
  data VARCHAR(2048) NULL
);
CREATE USER IF NOT EXISTS 'tidemark'@'%' IDENTIFIED BY '${TIDEMARK_DB_PASSWORD}';
GRANT SELECT, RELOAD, SHOW DATABASES, REPLICATION SLAVE, REPLICATION CLIENT ON *.* TO 'tidemark'@'%';
GRANT INSERT, UPDATE, DELETE ON tidemark.debezium_signal TO 'tidemark'@'%';
SQL
