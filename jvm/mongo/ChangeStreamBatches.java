import de.bwaldvogel.mongo.backend.CursorRegistry;
import de.bwaldvogel.mongo.backend.aggregation.Aggregation;
import de.bwaldvogel.mongo.bson.BinData;
import de.bwaldvogel.mongo.bson.BsonTimestamp;
import de.bwaldvogel.mongo.bson.Document;
import de.bwaldvogel.mongo.exception.MongoServerError;

import java.util.ArrayList;
import java.util.Collection;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.locks.ReentrantLock;
import java.util.stream.Stream;

/**
 * Change streams as their cursors read the event log: opening one ($changeStream options,
 * where it starts), and each batch of change event documents, rendered per stream (its
 * fullDocument options) and run through its further pipeline stages.
 */
final class ChangeStreamBatches {

    /** Keeps a reply well under the 16 MB BSON limit. */
    private static final long MAX_BATCH_BYTES = 4L * 1024 * 1024;
    /**
     * Events one batch looks at, at most: a stream that sees few of many events returns
     * (its token moved on) instead of holding the lock over the whole log.
     */
    private static final int MAX_SCAN = 500_000;
    /** MongoDB's default first batch size. */
    private static final int DEFAULT_FIRST_BATCH = 101;

    /** What a getMore (or the first batch) returns. */
    static final class Batch {
        final List<Document> documents;
        final Document postBatchResumeToken;
        final boolean finished;

        Batch(List<Document> documents, Document postBatchResumeToken, boolean finished) {
            this.documents = documents;
            this.postBatchResumeToken = postBatchResumeToken;
            this.finished = finished;
        }
    }

    private final ReentrantLock lock;
    private final ChangeEventLog log;
    private final ShadowCopies shadow;
    private final CursorRegistry cursorRegistry;

    ChangeStreamBatches(ReentrantLock lock, ChangeEventLog log, ShadowCopies shadow, CursorRegistry cursorRegistry) {
        this.lock = lock;
        this.log = log;
        this.shadow = shadow;
        this.cursorRegistry = cursorRegistry;
    }

    /**
     * Opens a change stream. db null: the deployment; coll null: a database. The
     * $changeStream options are checked as MongoDB does.
     */
    ChangeStreamCursor open(String db, String coll, String replyNs, Document spec, Aggregation stages) {
        for (String key : spec.keySet()) {
            switch (key) {
                case "resumeAfter", "startAfter", "startAtOperationTime", "fullDocument", "fullDocumentBeforeChange",
                    "allChangesForCluster", "showExpandedEvents", "showSystemEvents", "showMigrationEvents",
                    "allowToRunOnConfigDB", "allowToRunOnSystemNS", "showRawUpdateDescription" -> {
                }
                default -> throw new MongoServerError(40415, "Location40415",
                    "BSON field '$changeStream." + key + "' is an unknown field.");
            }
        }
        String fullDocument = stringOption(spec, "fullDocument", "default",
            Set.of("default", "updateLookup", "whenAvailable", "required"));
        String beforeChange = stringOption(spec, "fullDocumentBeforeChange", "off",
            Set.of("off", "whenAvailable", "required"));
        int starts = (spec.containsKey("resumeAfter") ? 1 : 0) + (spec.containsKey("startAfter") ? 1 : 0)
            + (spec.containsKey("startAtOperationTime") ? 1 : 0);
        if (starts > 1) {
            throw new MongoServerError(40674, "Location40674",
                "Only one type of resume option is allowed, but multiple were found.");
        }
        lock.lock();
        try {
            ChangeStreamCursor cursor = new ChangeStreamCursor(cursorRegistry.generateCursorId(), this, db, coll,
                replyNs, fullDocument, beforeChange, stages);
            if (spec.containsKey("resumeAfter") || spec.containsKey("startAfter")) {
                boolean startAfter = spec.containsKey("startAfter");
                String option = startAfter ? "startAfter" : "resumeAfter";
                long[] token = ResumeTokens.parseToken(spec.get(option), option);
                long ts = token[0];
                long idx = token[1];
                boolean invalidate = token[2] == 1;
                if (invalidate && !startAfter) {
                    throw new MongoServerError(260, "InvalidResumeToken",
                        "Attempting to resume a change stream using 'resumeAfter' is not allowed from an invalidate "
                            + "notification.");
                }
                if (Long.compareUnsigned(ts, log.historyStart()) < 0) {
                    throw historyLost();
                }
                int position = log.firstAfter(ts, idx);
                if (idx != ResumeTokens.HIGH_WATER && Long.compareUnsigned(ts, log.lastTs()) <= 0) {
                    ChangeEvent at = position > log.firstKept() ? log.get(position - 1) : null;
                    if (at == null || at.ts != ts || at.idx != idx) {
                        throw new MongoServerError(280, "ChangeStreamFatalError",
                            "cannot resume stream; the resume token was not found. " + spec.get(option));
                    }
                    if (!invalidate && cursor.matches(at) && cursor.invalidatedBy(at)) {
                        cursor.invalidator = at;
                    }
                }
                cursor.position = position;
                cursor.tokenTs = ts;
                cursor.tokenIdx = idx;
                cursor.tokenInvalidate = invalidate;
            } else if (spec.containsKey("startAtOperationTime")) {
                Object at = spec.get("startAtOperationTime");
                if (!(at instanceof BsonTimestamp)) {
                    throw new MongoServerError(14, "TypeMismatch",
                        "BSON field '$changeStream.startAtOperationTime' is the wrong type, expected type 'timestamp'");
                }
                long ts = ((BsonTimestamp) at).getValue();
                if (Long.compareUnsigned(ts, log.historyStart()) < 0) {
                    throw historyLost();
                }
                cursor.position = log.firstAfter(ts - 1, ResumeTokens.HIGH_WATER);
                cursor.tokenTs = ts - 1;
                cursor.tokenIdx = ResumeTokens.HIGH_WATER;
            } else {
                cursor.position = log.size();
                cursor.tokenTs = log.lastTs();
                cursor.tokenIdx = ResumeTokens.HIGH_WATER;
            }
            cursorRegistry.add(cursor);
            return cursor;
        } finally {
            lock.unlock();
        }
    }

    private static String stringOption(Document spec, String name, String defaultValue, Set<String> allowed) {
        Object value = spec.get(name);
        if (value == null) {
            return defaultValue;
        }
        if (!(value instanceof String) || !allowed.contains(value)) {
            throw new MongoServerError(2, "BadValue", "'" + value + "' is not a valid value for $changeStream." + name);
        }
        return (String) value;
    }

    private static MongoServerError historyLost() {
        return new MongoServerError(286, "ChangeStreamHistoryLost",
            "Resume of change stream was not possible, as the resume point may no longer be in the oplog.");
    }

    static int firstBatchSize(Document cursorOption) {
        Object batchSize = cursorOption.get("batchSize");
        return batchSize instanceof Number ? ((Number) batchSize).intValue() : DEFAULT_FIRST_BATCH;
    }

    /**
     * The next batch of a stream: at most {@code limit} events (no limit if &lt;= 0 except
     * for {@code zeroMeansNone}), at most about 4 MB.
     */
    Batch nextBatch(ChangeStreamCursor cursor, int limit) {
        return nextBatch(cursor, limit, false);
    }

    Batch nextBatch(ChangeStreamCursor cursor, int limit, boolean zeroMeansNone) {
        lock.lock();
        try {
            List<Document> out = new ArrayList<>();
            if (cursor.finished || (zeroMeansNone && limit == 0)) {
                return new Batch(out, cursorToken(cursor), cursor.finished);
            }
            long bytes = 0;
            int scanned = 0;
            while (true) {
                boolean full = (limit > 0 && out.size() >= limit) || bytes >= MAX_BATCH_BYTES;
                if (full) {
                    break;
                }
                if (cursor.invalidator != null) {
                    ChangeEvent by = cursor.invalidator;
                    Document invalidate = new Document("_id", ResumeTokens.token(by.ts, by.idx, true))
                        .append("operationType", "invalidate")
                        .append("clusterTime", new BsonTimestamp(by.ts))
                        .append("wallTime", by.wall);
                    out.add(invalidate);
                    cursor.tokenTs = by.ts;
                    cursor.tokenIdx = by.idx;
                    cursor.tokenInvalidate = true;
                    cursor.finished = true;
                    break;
                }
                if (cursor.position >= log.size()) {
                    if (ResumeTokens.compareKey(log.lastTs(), ResumeTokens.HIGH_WATER, cursor.tokenTs,
                        cursor.tokenIdx) > 0) {
                        cursor.tokenTs = log.lastTs();
                        cursor.tokenIdx = ResumeTokens.HIGH_WATER;
                        cursor.tokenInvalidate = false;
                    }
                    break;
                }
                if (scanned >= MAX_SCAN) {
                    break;
                }
                if (cursor.position < log.firstKept()) {
                    throw historyLost();
                }
                ChangeEvent event = log.get(cursor.position++);
                scanned++;
                cursor.tokenTs = event.ts;
                cursor.tokenIdx = event.idx;
                cursor.tokenInvalidate = false;
                if (!cursor.matches(event)) {
                    continue;
                }
                Document rendered = render(event, cursor);
                if (cursor.stages == null) {
                    out.add(rendered);
                    bytes += estimateSize(rendered);
                } else {
                    for (Document result : cursor.stages.runStages(Stream.of(rendered.cloneDeeply()))) {
                        out.add(result);
                        bytes += estimateSize(result);
                    }
                }
                if (cursor.invalidatedBy(event)) {
                    cursor.invalidator = event;
                }
            }
            return new Batch(out, cursorToken(cursor), cursor.finished);
        } finally {
            lock.unlock();
        }
    }

    private static Document cursorToken(ChangeStreamCursor cursor) {
        return ResumeTokens.token(cursor.tokenTs, cursor.tokenIdx, cursor.tokenInvalidate);
    }

    /** The change event document of {@code event} as {@code cursor} asked for it. */
    private Document render(ChangeEvent event, ChangeStreamCursor cursor) {
        Document document = new Document("_id", ResumeTokens.token(event.ts, event.idx, false))
            .append("operationType", event.op)
            .append("clusterTime", new BsonTimestamp(event.ts))
            .append("wallTime", event.wall);
        Document ns = new Document("db", event.db);
        if (event.coll != null) {
            ns.append("coll", event.coll);
        }
        document.append("ns", ns);
        if (event.op.equals("rename")) {
            document.append("to", new Document("db", event.toDb).append("coll", event.toColl));
        }
        if (event.hasId) {
            document.append("documentKey", new Document("_id", event.id));
        }
        switch (event.op) {
            case "insert", "replace" -> document.append("fullDocument", event.postImage);
            case "update" -> {
                document.append("updateDescription", event.updateDescription);
                switch (cursor.fullDocument) {
                    case "updateLookup" -> {
                        document.append("fullDocument", shadow.current(event.db + "." + event.coll, event.id));
                    }
                    case "whenAvailable" -> document.append("fullDocument", event.postImage);
                    case "required" -> document.append("fullDocument", required(event.postImage, "post", event));
                    default -> {
                    }
                }
            }
            default -> {
            }
        }
        if (!cursor.fullDocumentBeforeChange.equals("off")
            && (event.op.equals("update") || event.op.equals("replace") || event.op.equals("delete"))) {
            Document pre = cursor.fullDocumentBeforeChange.equals("required")
                ? required(event.preImage, "pre", event) : event.preImage;
            document.append("fullDocumentBeforeChange", pre);
        }
        if (event.lsid != null) {
            document.append("lsid", event.lsid).append("txnNumber", event.txnNumber);
        }
        return document;
    }

    private static Document required(Document image, String which, ChangeEvent event) {
        if (image == null) {
            throw new MongoServerError(47, "NoMatchingDocument",
                "Change stream was configured to require a " + which + "-image for all update, delete and replace "
                    + "events, but no " + which + "-image was available for event "
                    + ResumeTokens.tokenString(event.ts, event.idx, false));
        }
        return image;
    }

    /** Rough BSON size, to keep a reply well under 16 MB. */
    private static long estimateSize(Object value) {
        if (value instanceof Document) {
            long size = 5;
            for (Map.Entry<String, Object> entry : ((Document) value).entrySet()) {
                size += entry.getKey().length() + 2 + estimateSize(entry.getValue());
            }
            return size;
        } else if (value instanceof Collection<?>) {
            long size = 5;
            for (Object element : (Collection<?>) value) {
                size += 4 + estimateSize(element);
            }
            return size;
        } else if (value instanceof String) {
            return ((String) value).length() + 5;
        } else if (value instanceof BinData) {
            return ((BinData) value).getData().length + 5;
        }
        return 16;
    }
}
