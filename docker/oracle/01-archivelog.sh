#!/bin/bash
# LogMiner reads archived redo: switch the database to ARCHIVELOG mode (needs a restart
# in MOUNT state) and turn on supplemental logging. Idempotent: runs on every start.
set -euo pipefail
mode=$(sqlplus -s / as sysdba <<'SQL'
SET HEADING OFF FEEDBACK OFF
SELECT log_mode FROM v$database;
SQL
)
if ! grep -q "NOARCHIVELOG" <<<"$mode"; then
  exit 0
fi
sqlplus -s / as sysdba <<'SQL'
SHUTDOWN IMMEDIATE;
STARTUP MOUNT;
ALTER DATABASE ARCHIVELOG;
ALTER DATABASE OPEN;
ALTER DATABASE ADD SUPPLEMENTAL LOG DATA;
ALTER DATABASE ADD SUPPLEMENTAL LOG DATA (ALL) COLUMNS;
ALTER PLUGGABLE DATABASE ALL OPEN;
SQL
