#!/usr/bin/env bash
# Fetches the JVM artifacts named in jvm/pom.xml from Maven Central into the ignored
# .jars/ folder: .jars/spark (Delta, Spark's Kafka source, MariaDB JDBC) and
# .jars/kafka (the Kafka broker). Idempotent: skipped when the pom is unchanged.
set -euo pipefail
cd "$(dirname "$0")/.."

stamp=.jars/.fetched
want=$(sha256sum jvm/pom.xml | cut -d' ' -f1)
if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ]; then
  exit 0
fi
command -v mvn >/dev/null || { echo "fetch_jars: mvn not found (scripts/install_system.sh installs Maven)" >&2; exit 1; }

mkdir -p .jars
log=.jars/maven.log
: > "$log"
for profile in spark kafka-broker; do
  dest=.jars/${profile%-broker}
  rm -rf "$dest"
  if ! mvn -q -B -Dstyle.color=never -f jvm/pom.xml -P "$profile" dependency:copy-dependencies \
        -DoutputDirectory="$PWD/$dest" >>"$log" 2>&1; then
    sed 's/\x1b\[[0-9;]*m//g' "$log" | tail -30 >&2
    echo "fetch_jars: Maven could not fetch the '$profile' artifacts (full log: $log)" >&2
    exit 1
  fi
done
echo "$want" > "$stamp"
echo "fetch_jars: $(ls .jars/spark | wc -l) Spark jars, $(ls .jars/kafka | wc -l) Kafka broker jars in .jars/"
