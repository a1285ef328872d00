#!/usr/bin/env bash
# Fetches the JVM artifacts named in jvm/pom.xml from Maven Central into the ignored
# .jars/ folder: .jars/spark (Delta, Spark's Kafka source, MariaDB JDBC), .jars/kafka (the
# Kafka broker), .jars/debezium (Debezium's embedded engine and connectors) and
# .jars/vitess (Vitess's gRPC client jar, for its .proto files) and .jars/mongo
# (mongo-java-server), and compiles the parity test's recorder (jvm/recorder/) into
# .jars/recorder, the MongoDB test server (jvm/mongo/) into .jars/mongo-server and the
# merge's Spark classes (jvm/spark/, against pyspark's jars: run after
# scripts/install_python.sh) into .jars/spark/tidemark-spark.jar.
# Idempotent: skipped when neither the pom nor the Java sources changed.
set -euo pipefail
cd "$(dirname "$0")/.."

stamp=.jars/.fetched
want=$(cat jvm/pom.xml jvm/recorder/*.java jvm/mongo/*.java jvm/spark/*.java | sha256sum | cut -d' ' -f1)
if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ]; then
  exit 0
fi
command -v mvn >/dev/null || { echo "fetch_jars: mvn not found (scripts/install_system.sh installs Maven)" >&2; exit 1; }
command -v javac >/dev/null || { echo "fetch_jars: javac not found (scripts/install_system.sh installs a JDK)" >&2; exit 1; }

mkdir -p .jars
log=.jars/maven.log
: > "$log"
for profile in spark kafka-broker debezium vitess mongo; do
  dest=.jars/${profile%-broker}
  rm -rf "$dest"
  if ! mvn -q -B -Dstyle.color=never -f jvm/pom.xml -P "$profile" dependency:copy-dependencies \
        -DoutputDirectory="$PWD/$dest" >>"$log" 2>&1; then
    sed 's/\x1b\[[0-9;]*m//g' "$log" | tail -30 >&2
    echo "fetch_jars: Maven could not fetch the '$profile' artifacts (full log: $log)" >&2
    exit 1
  fi
done
rm -rf .jars/recorder
if ! javac -nowarn -d .jars/recorder -cp ".jars/debezium/*" jvm/recorder/*.java >>"$log" 2>&1; then
  tail -30 "$log" >&2
  echo "fetch_jars: the recorder (jvm/recorder/) did not compile (full log: $log)" >&2
  exit 1
fi
rm -rf .jars/mongo-server
if ! javac -nowarn -d .jars/mongo-server -cp ".jars/mongo/*" jvm/mongo/*.java >>"$log" 2>&1; then
  tail -30 "$log" >&2
  echo "fetch_jars: the MongoDB test server (jvm/mongo/) did not compile (full log: $log)" >&2
  exit 1
fi
pyspark_jars=$(.venv/bin/python -c 'import pathlib, pyspark; print(pathlib.Path(pyspark.__file__).parent / "jars")')
rm -rf .jars/spark-classes
if ! javac -nowarn -d .jars/spark-classes -cp "$pyspark_jars/*" jvm/spark/*.java >>"$log" 2>&1 \
    || ! jar cf .jars/spark/tidemark-spark.jar -C .jars/spark-classes . >>"$log" 2>&1; then
  tail -30 "$log" >&2
  echo "fetch_jars: the merge's Spark classes (jvm/spark/) did not compile (full log: $log)" >&2
  exit 1
fi
rm -rf .jars/spark-classes
echo "$want" > "$stamp"
echo "fetch_jars: $(ls .jars/spark | wc -l) Spark jars, $(ls .jars/kafka | wc -l) Kafka broker jars, $(ls .jars/debezium | wc -l) Debezium jars, $(ls .jars/vitess | wc -l) Vitess jar, $(ls .jars/mongo | wc -l) mongo-java-server jars in .jars/"
