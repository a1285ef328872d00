/*
 * Debezium's own records of a binlog range, for Tidemark's parity test.
 *
 * One JVM runs one Debezium embedded engine per configuration (each with its own topic
 * prefix and handling modes) on the same MariaDB or MySQL server, and writes every record
 * it emits as a JSON line: the topic, and the key, the value and each header as Kafka's
 * JsonConverter writes them (schemas included). Then it loads Tidemark's records with
 * the same JsonConverter (toConnectData): a record Kafka Connect cannot read is a failure.
 *
 *   java -cp '.jars/debezium/*:.jars/recorder' dev.tidemark.recorder.Recorder PLAN.json
 *
 * PLAN.json: {"engines": [{"name": N, "output": PATH, "properties": {...}}],
 *             "ready_table": T, "end_table": E, "timeout_seconds": S}
 * Protocol on stdout: "READY N" once engine N emitted a record of table T (it streams),
 * "DONE N" once it emitted one of table E (the range ended: that record and what follows
 * are not written), "RECORDED" when every engine is done. Then each line on stdin is a JSON-lines
 * file of Tidemark records ({"topic", "key", "value"} as JSON text) to load; for each,
 * "CHECKED PATH COUNT" and a "FAIL PATH LINE MESSAGE" line per record that does not load.
 *
 * Nothing here is Tidemark logic: it only drives Debezium and Kafka's converter.
 */
package dev.tidemark.recorder;

import java.io.BufferedReader;
import java.io.BufferedWriter;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.TimeUnit;

import org.apache.kafka.connect.header.Header;
import org.apache.kafka.connect.json.JsonConverter;
import org.apache.kafka.connect.source.SourceRecord;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ObjectNode;

import io.debezium.embedded.Connect;
import io.debezium.engine.ChangeEvent;
import io.debezium.engine.DebeziumEngine;

public final class Recorder {
    private static final ObjectMapper JSON = new ObjectMapper();

    private Recorder() {
    }

    public static void main(String[] args) throws Exception {
        JsonNode plan = JSON.readTree(Path.of(args[0]).toFile());
        String readyTable = plan.get("ready_table").asText();
        String endTable = plan.get("end_table").asText();
        long timeout = plan.path("timeout_seconds").asLong(120);
        List<EngineRun> runs = new ArrayList<>();
        for (JsonNode engine : plan.get("engines")) {
            runs.add(new EngineRun(engine, readyTable, endTable));
        }
        ExecutorService pool = Executors.newCachedThreadPool();
        for (EngineRun run : runs) {
            pool.execute(run.engine);
        }
        boolean finished = true;
        for (EngineRun run : runs) {
            finished &= run.done.await(timeout, TimeUnit.SECONDS);
        }
        for (EngineRun run : runs) {
            run.close();
        }
        pool.shutdown();
        if (!finished) {
            say("TIMEOUT");
            System.exit(2);
        }
        say("RECORDED");
        check(new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8)));
        System.exit(0);
    }

    static synchronized void say(String line) {
        System.out.println(line);
        System.out.flush();
    }

    /** Each file named on stdin: every record's key and value through JsonConverter.toConnectData. */
    static void check(BufferedReader stdin) throws Exception {
        JsonConverter keys = converter(true);
        JsonConverter values = converter(false);
        String path;
        while ((path = stdin.readLine()) != null && !path.isBlank()) {
            int count = 0;
            int lineNumber = 0;
            for (String line : Files.readAllLines(Path.of(path), StandardCharsets.UTF_8)) {
                lineNumber++;
                if (line.isBlank()) {
                    continue;
                }
                JsonNode record = JSON.readTree(line);
                String topic = record.get("topic").asText();
                try {
                    if (!record.get("key").isNull()) {
                        keys.toConnectData(topic, record.get("key").asText().getBytes(StandardCharsets.UTF_8));
                    }
                    if (!record.get("value").isNull()) {
                        values.toConnectData(topic, record.get("value").asText().getBytes(StandardCharsets.UTF_8));
                    }
                }
                catch (RuntimeException e) {
                    say("FAIL " + path + " " + lineNumber + " " + e.getClass().getSimpleName() + ": " + e.getMessage());
                }
                count++;
            }
            say("CHECKED " + path + " " + count);
        }
    }

    static JsonConverter converter(boolean isKey) {
        JsonConverter converter = new JsonConverter();
        converter.configure(Map.of("schemas.enable", "true"), isKey);
        return converter;
    }

    /** One Debezium engine writing its records to a JSON-lines file. */
    static final class EngineRun {
        final String name;
        final String readyTable;
        final String endTable;
        final BufferedWriter out;
        final CountDownLatch done = new CountDownLatch(1);
        final JsonConverter keys = converter(true);
        final JsonConverter values = converter(false);
        final DebeziumEngine<ChangeEvent<SourceRecord, SourceRecord>> engine;
        boolean ready;

        EngineRun(JsonNode spec, String readyTable, String endTable) throws Exception {
            this.name = spec.get("name").asText();
            this.readyTable = readyTable;
            this.endTable = endTable;
            this.out = Files.newBufferedWriter(Path.of(spec.get("output").asText()), StandardCharsets.UTF_8);
            Properties props = new Properties();
            spec.get("properties").properties().forEach(e -> props.setProperty(e.getKey(), e.getValue().asText()));
            this.engine = DebeziumEngine.create(Connect.class)
                    .using(props)
                    .notifying(this::accept)
                    .using((success, message, error) -> {
                        if (!success) {
                            say("ENGINE-FAILED " + name + " " + message + (error == null ? "" : " " + error));
                        }
                        done.countDown();
                    })
                    .build();
        }

        void accept(ChangeEvent<SourceRecord, SourceRecord> event) {
            SourceRecord record = event.value();
            String topic = record.topic();
            try {
                if (topic.endsWith("." + readyTable) && !ready) {
                    ready = true;
                    say("READY " + name);
                }
                if (topic.endsWith("." + endTable) && done.getCount() > 0) {
                    out.flush();
                    say("DONE " + name);
                    done.countDown();
                }
                if (done.getCount() == 0) {
                    return; // the range ended
                }
                ObjectNode line = JSON.createObjectNode();
                line.put("topic", topic);
                line.set("key", record.key() == null ? null
                        : JSON.readTree(keys.fromConnectData(topic, record.keySchema(), record.key())));
                line.set("value", record.value() == null ? null
                        : JSON.readTree(values.fromConnectData(topic, record.valueSchema(), record.value())));
                ObjectNode headers = JSON.createObjectNode();
                for (Header header : record.headers()) {
                    byte[] value = keys.fromConnectHeader(topic, header.key(), header.schema(), header.value());
                    headers.set(header.key(), value == null ? null : JSON.readTree(value));
                }
                line.set("headers", headers);
                out.write(JSON.writeValueAsString(line));
                out.newLine();
            }
            catch (Exception e) {
                throw new RuntimeException(e);
            }
        }

        void close() throws Exception {
            engine.close();
            out.close();
        }
    }
}
