import de.bwaldvogel.mongo.MongoCollection;
import de.bwaldvogel.mongo.MongoDatabase;
import de.bwaldvogel.mongo.backend.ArrayFilters;
import de.bwaldvogel.mongo.backend.Cursor;
import de.bwaldvogel.mongo.backend.CursorRegistry;
import de.bwaldvogel.mongo.backend.ValueComparator;
import de.bwaldvogel.mongo.backend.aggregation.Aggregation;
import de.bwaldvogel.mongo.bson.BinData;
import de.bwaldvogel.mongo.bson.BsonTimestamp;
import de.bwaldvogel.mongo.bson.Document;
import de.bwaldvogel.mongo.exception.MongoServerError;
import de.bwaldvogel.mongo.oplog.NoopOplog;
import de.bwaldvogel.mongo.oplog.Oplog;

import java.time.Instant;
import java.util.ArrayList;
import java.util.Collection;
import java.util.HashMap;
import java.util.Iterator;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.Set;
import java.util.TreeMap;
import java.util.concurrent.locks.ReentrantLock;
import java.util.stream.Stream;

/**
 * Change streams the way a MongoDB 6.0 replica-set primary produces them, for
 * mongo-java-server (which keeps doing storage, queries and the wire protocol).
 *
 * <p>The base server calls this {@link Oplog} after each insert, update, delete and
 * collection drop; {@link ChangeStreamBackend} calls it for what the base server does not
 * report (findAndModify, dropDatabase, renameCollection, transactions) and for the
 * change-stream commands themselves. It keeps:
 * <ul>
 * <li>an in-memory event log ordered by (clusterTime, index in transaction); a stream's
 * start is found by binary search, so a getMore costs what it returns (plus the events of
 * other namespaces it skips);</li>
 * <li>a shadow copy of every document of every user namespace, kept in step with every
 * write, which gives exact pre-images (fullDocumentBeforeChange), post-images at event
 * time (fullDocument "whenAvailable"/"required") and the values of updateDescription;</li>
 * <li>the open multi-document transactions: their events are held until commitTransaction
 * and then published as one group sharing one clusterTime; abortTransaction undoes their
 * writes from the shadow copies.</li>
 * </ul>
 *
 * <p>Event documents: {@code _id} (resume token), {@code operationType},
 * {@code clusterTime}, {@code wallTime}, {@code ns}, {@code documentKey},
 * [{@code updateDescription}], [{@code fullDocument}], [{@code fullDocumentBeforeChange}],
 * [{@code lsid}, {@code txnNumber}]. Resume tokens are {@code {_data: hex}}: 16 hex digits of
 * the clusterTime (seconds &lt;&lt; 32 | increment), 8 of the event's index in its
 * transaction (0 otherwise; ffffffff in a "high-water mark" token that stands for "after
 * everything up to this clusterTime", as postBatchResumeToken of an idle stream), and "01"
 * appended for an invalidate event. Tokens order as the events do (also as strings).
 *
 * <p>Differs from MongoDB: the token format is not MongoDB's KeyString; the history is
 * kept from server start, forever, in memory (a token or startAtOperationTime older than
 * the server start is ChangeStreamHistoryLost, 286; a well-formed token of an event this
 * server never had is ChangeStreamFatalError, 280); a transaction's writes apply at once
 * and are visible to everyone before commit (no isolation, no write conflicts), only
 * their events wait for the commit; updateDescription is derived from the update spec
 * (each path set, with positional paths such as {@code a.$.b} reported as the whole array
 * {@code a}; appends by $push/$addToSet as {@code arr.N} keys, as MongoDB 5.0+ does; a path
 * whose parent did not exist as the topmost new field), truncatedArrays is always empty;
 * pre- and post-images are always available (no changeStreamPreAndPostImages collection
 * option needed, no expiry); dropping a renamed-over target shows a drop before the
 * rename; writes made by $out/$merge are not seen; there are no "create"/"createIndexes"
 * events (showExpandedEvents is ignored); local.oplog.rs is not written (every reply carries
 * operationTime instead).
 */
public final class ChangeStreamOplog implements Oplog {

    static final long HIGH_WATER = 0xFFFFFFFFL;
    private static final Set<String> INTERNAL_DATABASES = Set.of("admin", "config", "local");
    private static final long MAX_BATCH_BYTES = 4L * 1024 * 1024;
    private static final int MAX_SCAN = 500_000;
    private static final int DEFAULT_FIRST_BATCH = 101;
    private static final Object MISSING = new Object();

    /** One change event as recorded (rendered per stream when read). */
    static final class Event {
        long ts;
        long idx;
        Instant wall;
        final String op;
        final String db;
        final String coll;
        final Object id;
        final boolean hasId;
        Document updateDescription;
        Document postImage;
        Document preImage;
        String toDb;
        String toColl;
        Document lsid;
        Long txnNumber;

        Event(String op, String ns, Object id, boolean hasId) {
            this.op = op;
            int dot = ns.indexOf('.');
            this.db = dot < 0 ? ns : ns.substring(0, dot);
            this.coll = dot < 0 ? null : ns.substring(dot + 1);
            this.id = id;
            this.hasId = hasId;
        }
    }

    /** A write of an open transaction, to undo on abort. */
    private static final class Undo {
        final String ns;
        final Object id;
        final Document before;
        final boolean afterExists;

        Undo(String ns, Object id, Document before, boolean afterExists) {
            this.ns = ns;
            this.id = id;
            this.before = before;
            this.afterExists = afterExists;
        }
    }

    /** A multi-document transaction: (lsid, txnNumber). */
    static final class Txn {
        final Document lsid;
        final long txnNumber;
        final String lsidKey;
        final List<Event> events = new ArrayList<>();
        final List<Undo> undo = new ArrayList<>();
        String state = "active";

        Txn(Document lsid, long txnNumber, String lsidKey) {
            this.lsid = lsid;
            this.txnNumber = txnNumber;
            this.lsidKey = lsidKey;
        }
    }

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

    final ReentrantLock lock = new ReentrantLock();
    private final ChangeStreamBackend backend;
    private final CursorRegistry cursorRegistry;

    private final long historyStart;
    private volatile long lastTs;
    private volatile Instant lastWall;

    private final ArrayList<Event> events = new ArrayList<>();
    private final Map<String, TreeMap<Object, Document>> shadow = new HashMap<>();
    private final Map<String, Txn> transactions = new HashMap<>();
    private final ThreadLocal<Txn> currentTxn = new ThreadLocal<>();

    ChangeStreamOplog(ChangeStreamBackend backend, CursorRegistry cursorRegistry) {
        this.backend = backend;
        this.cursorRegistry = cursorRegistry;
        long seconds = System.currentTimeMillis() / 1000;
        this.historyStart = seconds << 32;
        this.lastTs = historyStart;
        this.lastWall = Instant.now();
    }

    // ------------------------------------------------------------------ clock

    /** The cluster time now: that of the newest event (or the server start). */
    BsonTimestamp clusterTime() {
        return new BsonTimestamp(lastTs);
    }

    Instant lastWriteDate() {
        return lastWall;
    }

    private long tick() {
        long nowSeconds = System.currentTimeMillis() / 1000;
        long ts = lastTs;
        if (nowSeconds > (ts >>> 32)) {
            ts = (nowSeconds << 32) | 1;
        } else {
            ts = ts + 1;
        }
        lastWall = Instant.now();
        lastTs = ts;
        return ts;
    }

    // ------------------------------------------------------------------ tokens

    static String tokenString(long ts, long idx, boolean invalidate) {
        return String.format("%016x%08x", ts, idx) + (invalidate ? "01" : "");
    }

    static Document token(long ts, long idx, boolean invalidate) {
        return new Document("_data", tokenString(ts, idx, invalidate));
    }

    private static int compareKey(long ts1, long idx1, long ts2, long idx2) {
        int c = Long.compareUnsigned(ts1, ts2);
        return c != 0 ? c : Long.compare(idx1, idx2);
    }

    /** {ts, idx, invalidate?1:0} of a resume token, or error 260 InvalidResumeToken. */
    static long[] parseToken(Object token, String option) {
        if (!(token instanceof Document)) {
            throw new MongoServerError(260, "InvalidResumeToken",
                "the " + option + " resume token must be an object with a string '_data'");
        }
        Object data = ((Document) token).get("_data");
        if (!(data instanceof String) || ((Document) token).size() != 1) {
            throw new MongoServerError(260, "InvalidResumeToken",
                "malformed resume token " + token + ": expected {_data: <hex string>}");
        }
        String hex = (String) data;
        boolean okLength = hex.length() == 24 || (hex.length() == 26 && hex.endsWith("01"));
        if (!okLength || !hex.chars().allMatch(ch -> Character.digit(ch, 16) >= 0)) {
            throw new MongoServerError(260, "InvalidResumeToken",
                "malformed resume token " + token + ": not a token of this server");
        }
        long ts = Long.parseUnsignedLong(hex.substring(0, 16), 16);
        long idx = Long.parseLong(hex.substring(16, 24), 16);
        return new long[] {ts, idx, hex.length() == 26 ? 1 : 0};
    }

    /** First index of an event whose key is greater than (ts, idx). */
    private int firstAfter(long ts, long idx) {
        int lo = 0;
        int hi = events.size();
        while (lo < hi) {
            int mid = (lo + hi) >>> 1;
            Event e = events.get(mid);
            if (compareKey(e.ts, e.idx, ts, idx) <= 0) {
                lo = mid + 1;
            } else {
                hi = mid;
            }
        }
        return lo;
    }

    // ------------------------------------------------------------------ namespaces, shadow copies

    static boolean tracked(String ns) {
        int dot = ns.indexOf('.');
        if (dot <= 0) {
            return false;
        }
        String db = ns.substring(0, dot);
        String coll = ns.substring(dot + 1);
        return !INTERNAL_DATABASES.contains(db) && !coll.startsWith("system.") && !coll.contains("$");
    }

    private TreeMap<Object, Document> docs(String ns) {
        return shadow.computeIfAbsent(ns, k -> new TreeMap<>(ValueComparator.ascWithoutListHandling()));
    }

    private static Document lookup(MongoCollection<?> collection, Object id) {
        if (collection == null) {
            return null;
        }
        for (Document document : collection.handleQuery(new Document("_id", id), 0, 1)) {
            return document;
        }
        return null;
    }

    // ------------------------------------------------------------------ recording

    private void record(Event event, Undo undo) {
        Txn txn = currentTxn.get();
        if (txn != null && undo != null) {
            event.lsid = txn.lsid;
            event.txnNumber = txn.txnNumber;
            txn.events.add(event);
            txn.undo.add(undo);
        } else {
            publish(List.of(event));
        }
    }

    private void publish(List<Event> group) {
        if (group.isEmpty()) {
            return;
        }
        long ts = tick();
        Instant wall = lastWall;
        long idx = 0;
        for (Event event : group) {
            event.ts = ts;
            event.idx = idx++;
            event.wall = wall;
            events.add(event);
        }
    }

    private void recordInsert(String ns, Object id, Document image) {
        docs(ns).put(id, image);
        Event event = new Event("insert", ns, id, true);
        event.postImage = image;
        record(event, new Undo(ns, id, null, true));
    }

    private void recordChange(String ns, Object id, Object updateSpec, Document before, Document image) {
        docs(ns).put(id, image);
        boolean operators = isOperatorUpdate(updateSpec);
        Event event = new Event(operators ? "update" : "replace", ns, id, true);
        event.postImage = image;
        event.preImage = before;
        if (operators) {
            event.updateDescription = describeUpdate((Document) updateSpec, before, image);
        }
        record(event, new Undo(ns, id, before, true));
    }

    private void recordDelete(String ns, Object id) {
        Document before = docs(ns).remove(id);
        Event event = new Event("delete", ns, id, true);
        event.preImage = before;
        record(event, new Undo(ns, id, before, false));
    }

    @Override
    public void handleInsert(String namespace, List<Document> documents) {
        if (!tracked(namespace)) {
            return;
        }
        lock.lock();
        try {
            MongoCollection<?> collection = backend.findCollection(namespace);
            TreeMap<Object, Document> docs = docs(namespace);
            for (Document document : documents) {
                if (!document.containsKey("_id")) {
                    continue; // never inserted (an ordered insert stopped before it)
                }
                Object id = document.get("_id");
                if (docs.containsKey(id)) {
                    continue; // a duplicate key: not inserted
                }
                Document stored = lookup(collection, id);
                if (stored == null) {
                    continue; // failed (another unique index) or not reached
                }
                recordInsert(namespace, id, stored.cloneDeeply());
            }
        } finally {
            lock.unlock();
        }
    }

    @Override
    public void handleUpdate(String namespace, Document selector, Document query, List<Object> modifiedIds) {
        if (!tracked(namespace) || modifiedIds.isEmpty()) {
            return;
        }
        lock.lock();
        try {
            MongoCollection<?> collection = backend.findCollection(namespace);
            TreeMap<Object, Document> docs = docs(namespace);
            for (Object id : modifiedIds) {
                Document stored = lookup(collection, id);
                if (stored == null) {
                    continue;
                }
                recordChange(namespace, id, query, docs.get(id), stored.cloneDeeply());
            }
        } finally {
            lock.unlock();
        }
    }

    @Override
    public void handleDelete(String namespace, Document query, List<Object> deletedIds) {
        if (!tracked(namespace) || deletedIds.isEmpty()) {
            return;
        }
        lock.lock();
        try {
            for (Object id : deletedIds) {
                recordDelete(namespace, id);
            }
        } finally {
            lock.unlock();
        }
    }

    @Override
    public void handleDropCollection(String namespace) {
        if (!tracked(namespace)) {
            return;
        }
        lock.lock();
        try {
            shadow.remove(namespace);
            publish(List.of(new Event("drop", namespace, null, false)));
        } finally {
            lock.unlock();
        }
    }

    /** How many events have been published (to see whether a command produced any). */
    int eventCount() {
        lock.lock();
        try {
            return events.size();
        } finally {
            lock.unlock();
        }
    }

    /** After dropDatabase of a database that existed (its collections' drops came first). */
    void recordDropDatabase(String db) {
        if (INTERNAL_DATABASES.contains(db)) {
            return;
        }
        lock.lock();
        try {
            shadow.keySet().removeIf(ns -> ns.startsWith(db + "."));
            publish(List.of(new Event("dropDatabase", db, null, false)));
        } finally {
            lock.unlock();
        }
    }

    /** After a successful renameCollection. */
    void recordRename(String from, String to) {
        lock.lock();
        try {
            TreeMap<Object, Document> moved = shadow.remove(from);
            shadow.remove(to);
            if (moved != null && tracked(to)) {
                shadow.put(to, moved);
            }
            if (!tracked(from)) {
                return;
            }
            Event event = new Event("rename", from, null, false);
            int dot = to.indexOf('.');
            event.toDb = to.substring(0, dot);
            event.toColl = to.substring(dot + 1);
            publish(List.of(event));
        } finally {
            lock.unlock();
        }
    }

    /** After a findAndModify that matched the document {@code id}. */
    void afterFindAndModify(String ns, Object id, Object updateSpec) {
        if (!tracked(ns)) {
            return;
        }
        lock.lock();
        try {
            Document stored = lookup(backend.findCollection(ns), id);
            Document before = docs(ns).get(id);
            if (stored == null) {
                if (before != null) {
                    recordDelete(ns, id);
                }
            } else if (before == null || !before.equals(stored)) {
                recordChange(ns, id, updateSpec, before, stored.cloneDeeply());
            }
        } finally {
            lock.unlock();
        }
    }

    /** After a findAndModify that matched nothing and may have upserted. */
    void afterFindAndModifyUpsert(String ns, Object replyValue) {
        if (!tracked(ns)) {
            return;
        }
        lock.lock();
        try {
            MongoCollection<?> collection = backend.findCollection(ns);
            if (collection == null) {
                return;
            }
            TreeMap<Object, Document> docs = docs(ns);
            if (replyValue instanceof Document && ((Document) replyValue).containsKey("_id")) {
                Object id = ((Document) replyValue).get("_id");
                Document stored = lookup(collection, id);
                if (stored != null && !docs.containsKey(id)) {
                    recordInsert(ns, id, stored.cloneDeeply());
                    return;
                }
            }
            List<Document> found = new ArrayList<>();
            for (Document document : collection.queryAll()) {
                if (!docs.containsKey(document.get("_id"))) {
                    found.add(document);
                }
            }
            for (Document document : found) {
                recordInsert(ns, document.get("_id"), document.cloneDeeply());
            }
        } finally {
            lock.unlock();
        }
    }

    // ------------------------------------------------------------------ transactions

    private static String txnKey(String lsidKey, long txnNumber) {
        return lsidKey + "#" + txnNumber;
    }

    /**
     * The transaction a command belongs to (it has autocommit: false, lsid, txnNumber),
     * or null. A startTransaction aborts the session's older open transaction.
     */
    Txn transactionOf(String command, Document query) {
        Object autocommit = query.get("autocommit");
        Object lsid = query.get("lsid");
        Object txnNumber = query.get("txnNumber");
        if (!Boolean.FALSE.equals(autocommit) || !(lsid instanceof Document) || !(txnNumber instanceof Number)) {
            return null;
        }
        String lsidKey = lsid.toString();
        long number = ((Number) txnNumber).longValue();
        boolean start = Boolean.TRUE.equals(query.get("startTransaction"));
        lock.lock();
        try {
            String key = txnKey(lsidKey, number);
            Txn txn = transactions.get(key);
            if (start) {
                for (Txn other : new ArrayList<>(transactions.values())) {
                    if (other.lsidKey.equals(lsidKey) && other.txnNumber != number && other.state.equals("active")) {
                        abort(other);
                    }
                }
                if (txn == null || !txn.state.equals("active")) {
                    txn = new Txn((Document) lsid, number, lsidKey);
                    transactions.put(key, txn);
                }
                return txn;
            }
            if (txn == null) {
                throw new MongoServerError(251, "NoSuchTransaction",
                    "Transaction with { txnNumber: " + number + " } has been aborted or was never started.");
            }
            if (txn.state.equals("aborted")) {
                throw new MongoServerError(251, "NoSuchTransaction",
                    "Transaction with { txnNumber: " + number + " } has been aborted.");
            }
            if (txn.state.equals("committed")) {
                throw new MongoServerError(256, "TransactionCommitted",
                    "Transaction with { txnNumber: " + number + " } has been committed.");
            }
            return txn;
        } finally {
            lock.unlock();
        }
    }

    void setCurrent(Txn txn) {
        currentTxn.set(txn);
    }

    void clearCurrent() {
        currentTxn.remove();
    }

    /** commitTransaction: publish the held events as one group. */
    void commit(Document query) {
        Txn txn = lookupTxn(query);
        if (txn == null) {
            return; // nothing written (read-only), or an unknown one: nothing to show
        }
        lock.lock();
        try {
            if (txn.state.equals("aborted")) {
                throw new MongoServerError(251, "NoSuchTransaction",
                    "Transaction with { txnNumber: " + txn.txnNumber + " } has been aborted.");
            }
            if (txn.state.equals("active")) {
                publish(txn.events);
                txn.events.clear();
                txn.undo.clear();
                txn.state = "committed";
            }
        } finally {
            lock.unlock();
        }
    }

    /** abortTransaction: undo the writes, drop the held events. */
    void abort(Document query) {
        Txn txn = lookupTxn(query);
        if (txn == null) {
            return;
        }
        lock.lock();
        try {
            if (txn.state.equals("committed")) {
                throw new MongoServerError(256, "TransactionCommitted",
                    "Transaction with { txnNumber: " + txn.txnNumber + " } has been committed.");
            }
            if (txn.state.equals("active")) {
                abort(txn);
            }
        } finally {
            lock.unlock();
        }
    }

    private Txn lookupTxn(Document query) {
        Object lsid = query.get("lsid");
        Object txnNumber = query.get("txnNumber");
        if (!(lsid instanceof Document) || !(txnNumber instanceof Number)) {
            return null;
        }
        lock.lock();
        try {
            return transactions.get(txnKey(lsid.toString(), ((Number) txnNumber).longValue()));
        } finally {
            lock.unlock();
        }
    }

    private void abort(Txn txn) {
        for (int i = txn.undo.size() - 1; i >= 0; i--) {
            Undo undo = txn.undo.get(i);
            MongoCollection<?> collection = backend.findCollection(undo.ns);
            TreeMap<Object, Document> docs = docs(undo.ns);
            Document idQuery = new Document("_id", undo.id);
            if (undo.before == null) { // an insert: remove it
                if (collection != null) {
                    collection.deleteDocuments(idQuery, 1, NoopOplog.get());
                }
                docs.remove(undo.id);
            } else if (undo.afterExists) { // an update or replace: put the old one back
                if (collection == null) {
                    collection = backend.findOrCreateCollection(undo.ns);
                }
                collection.updateDocuments(idQuery, undo.before.cloneDeeply(), ArrayFilters.empty(), false, true,
                    NoopOplog.get());
                docs.put(undo.id, undo.before);
            } else { // a delete: insert it again
                if (collection == null) {
                    collection = backend.findOrCreateCollection(undo.ns);
                }
                if (lookup(collection, undo.id) == null) {
                    collection.insertDocuments(List.of(undo.before.cloneDeeply()), true);
                }
                docs.put(undo.id, undo.before);
            }
        }
        txn.undo.clear();
        txn.events.clear();
        txn.state = "aborted";
    }

    // ------------------------------------------------------------------ streams

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
                long[] token = parseToken(spec.get(option), option);
                long ts = token[0];
                long idx = token[1];
                boolean invalidate = token[2] == 1;
                if (invalidate && !startAfter) {
                    throw new MongoServerError(260, "InvalidResumeToken",
                        "Attempting to resume a change stream using 'resumeAfter' is not allowed from an invalidate "
                            + "notification.");
                }
                if (Long.compareUnsigned(ts, historyStart) < 0) {
                    throw new MongoServerError(286, "ChangeStreamHistoryLost",
                        "Resume of change stream was not possible, as the resume point may no longer be in the oplog.");
                }
                int position = firstAfter(ts, idx);
                if (idx != HIGH_WATER && Long.compareUnsigned(ts, lastTs) <= 0) {
                    Event at = position > 0 ? events.get(position - 1) : null;
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
                if (Long.compareUnsigned(ts, historyStart) < 0) {
                    throw new MongoServerError(286, "ChangeStreamHistoryLost",
                        "Resume of change stream was not possible, as the resume point may no longer be in the oplog.");
                }
                cursor.position = firstAfter(ts - 1, HIGH_WATER);
                cursor.tokenTs = ts - 1;
                cursor.tokenIdx = HIGH_WATER;
            } else {
                cursor.position = events.size();
                cursor.tokenTs = lastTs;
                cursor.tokenIdx = HIGH_WATER;
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
                    Event by = cursor.invalidator;
                    Document invalidate = new Document("_id", token(by.ts, by.idx, true))
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
                if (cursor.position >= events.size()) {
                    if (compareKey(lastTs, HIGH_WATER, cursor.tokenTs, cursor.tokenIdx) > 0) {
                        cursor.tokenTs = lastTs;
                        cursor.tokenIdx = HIGH_WATER;
                        cursor.tokenInvalidate = false;
                    }
                    break;
                }
                if (scanned >= MAX_SCAN) {
                    break;
                }
                Event event = events.get(cursor.position++);
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
        return token(cursor.tokenTs, cursor.tokenIdx, cursor.tokenInvalidate);
    }

    /** The change event document of {@code event} as {@code cursor} asked for it. */
    private Document render(Event event, ChangeStreamCursor cursor) {
        Document document = new Document("_id", token(event.ts, event.idx, false))
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
                        TreeMap<Object, Document> docs = shadow.get(event.db + "." + event.coll);
                        document.append("fullDocument", docs == null ? null : docs.get(event.id));
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

    private static Document required(Document image, String which, Event event) {
        if (image == null) {
            throw new MongoServerError(47, "NoMatchingDocument",
                "Change stream was configured to require a " + which + "-image for all update, delete and replace "
                    + "events, but no " + which + "-image was available for event " + tokenString(event.ts, event.idx,
                    false));
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

    /** Oplog interface: a collection stream opened through the base server's code. */
    @Override
    public Cursor createCursor(Document changeStreamDocument, String namespace, Aggregation aggregation) {
        int dot = namespace.indexOf('.');
        return open(namespace.substring(0, dot), namespace.substring(dot + 1), namespace, changeStreamDocument,
            aggregation);
    }

    // ------------------------------------------------------------------ updateDescription

    static boolean isOperatorUpdate(Object updateSpec) {
        if (!(updateSpec instanceof Document) || ((Document) updateSpec).isEmpty()) {
            return false;
        }
        for (String key : ((Document) updateSpec).keySet()) {
            if (key.startsWith("$")) {
                return true;
            }
        }
        return false;
    }

    static Object getPath(Object document, String path) {
        Object current = document;
        for (String part : path.split("\\.", -1)) {
            if (current instanceof Document) {
                Document d = (Document) current;
                if (!d.containsKey(part)) {
                    return MISSING;
                }
                current = d.get(part);
            } else if (current instanceof List<?>) {
                List<?> list = (List<?>) current;
                if (part.isEmpty() || !part.chars().allMatch(Character::isDigit) || part.length() > 9) {
                    return MISSING;
                }
                int index = Integer.parseInt(part);
                if (index >= list.size()) {
                    return MISSING;
                }
                current = list.get(index);
            } else {
                return MISSING;
            }
        }
        return current;
    }

    /** "a.$.b", "a.$[].b", "a.$[x].b" → "a" (the array as a whole). */
    private static String cutPositional(String path) {
        String[] parts = path.split("\\.", -1);
        for (int i = 0; i < parts.length; i++) {
            if (parts[i].equals("$") || parts[i].startsWith("$[")) {
                return i == 0 ? path : String.join(".", java.util.Arrays.copyOfRange(parts, 0, i));
            }
        }
        return path;
    }

    /** The shortest prefix of {@code path} that the old document did not have. */
    private static String topmostCreated(Document before, String path) {
        if (before == null) {
            return path;
        }
        String[] parts = path.split("\\.", -1);
        StringBuilder prefix = new StringBuilder();
        for (int i = 0; i < parts.length - 1; i++) {
            if (i > 0) {
                prefix.append('.');
            }
            prefix.append(parts[i]);
            if (getPath(before, prefix.toString()) == MISSING) {
                return prefix.toString();
            }
        }
        return path;
    }

    static Document describeUpdate(Document spec, Document before, Document after) {
        Map<String, Object> updated = new LinkedHashMap<>();
        List<String> removed = new ArrayList<>();
        for (Map.Entry<String, Object> entry : spec.entrySet()) {
            String operator = entry.getKey();
            if (!(entry.getValue() instanceof Document)) {
                continue;
            }
            Document arguments = (Document) entry.getValue();
            for (Map.Entry<String, Object> argument : arguments.entrySet()) {
                String path = argument.getKey();
                switch (operator) {
                    case "$setOnInsert" -> {
                    }
                    case "$unset" -> unsetPath(cutPositional(path), before, after, updated, removed);
                    case "$rename" -> {
                        unsetPath(path, before, after, updated, removed);
                        if (argument.getValue() instanceof String) {
                            setPath((String) argument.getValue(), before, after, updated);
                        }
                    }
                    case "$push", "$addToSet" -> appendPath(path, before, after, updated);
                    default -> setPath(path, before, after, updated);
                }
            }
        }
        if (updated.isEmpty() && removed.isEmpty() && before != null) {
            // a change the spec does not explain (should not happen): top-level differences
            for (Map.Entry<String, Object> field : after.entrySet()) {
                if (!Objects.equals(before.getOrDefault(field.getKey(), MISSING), field.getValue())) {
                    updated.put(field.getKey(), field.getValue());
                }
            }
            for (String key : before.keySet()) {
                if (!after.containsKey(key)) {
                    removed.add(key);
                }
            }
        }
        // a path inside another reported one is covered by it
        for (Iterator<String> it = updated.keySet().iterator(); it.hasNext(); ) {
            String path = it.next();
            for (String other : updated.keySet()) {
                if (path.startsWith(other + ".")) {
                    it.remove();
                    break;
                }
            }
        }
        Document updatedFields = new Document();
        updatedFields.putAll(updated);
        return new Document("updatedFields", updatedFields)
            .append("removedFields", removed)
            .append("truncatedArrays", new ArrayList<>());
    }

    private static void setPath(String path, Document before, Document after, Map<String, Object> updated) {
        String effective = topmostCreated(before, cutPositional(path));
        Object now = getPath(after, effective);
        if (now == MISSING) {
            return;
        }
        Object old = before == null ? MISSING : getPath(before, effective);
        if (!Objects.equals(old, now)) {
            updated.put(effective, now);
        }
    }

    private static void appendPath(String path, Document before, Document after, Map<String, Object> updated) {
        String cut = cutPositional(path);
        if (!cut.equals(path) || before == null) {
            setPath(path, before, after, updated);
            return;
        }
        Object old = getPath(before, path);
        Object now = getPath(after, path);
        if (old instanceof List<?> && now instanceof List<?>) {
            List<?> oldList = (List<?>) old;
            List<?> newList = (List<?>) now;
            if (newList.size() >= oldList.size() && newList.subList(0, oldList.size()).equals(oldList)) {
                for (int i = oldList.size(); i < newList.size(); i++) {
                    updated.put(path + "." + i, newList.get(i));
                }
                return;
            }
        }
        setPath(path, before, after, updated);
    }

    private static void unsetPath(String path, Document before, Document after, Map<String, Object> updated,
                                  List<String> removed) {
        if (before == null || getPath(before, path) == MISSING) {
            return;
        }
        Object now = getPath(after, path);
        if (now == MISSING) {
            if (!removed.contains(path)) {
                removed.add(path);
            }
        } else if (!Objects.equals(getPath(before, path), now)) {
            updated.put(path, now); // $unset of an array element sets it to null
        }
    }

    // ------------------------------------------------------------------ for the backend

    static boolean isInternalDatabase(String db) {
        return INTERNAL_DATABASES.contains(db);
    }

    MongoDatabase database(String db) {
        return backend.resolveDatabase(db);
    }
}
