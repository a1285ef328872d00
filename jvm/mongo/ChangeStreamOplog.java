import de.bwaldvogel.mongo.MongoCollection;
import de.bwaldvogel.mongo.backend.Cursor;
import de.bwaldvogel.mongo.backend.CursorRegistry;
import de.bwaldvogel.mongo.backend.aggregation.Aggregation;
import de.bwaldvogel.mongo.bson.BsonTimestamp;
import de.bwaldvogel.mongo.bson.Document;
import de.bwaldvogel.mongo.oplog.Oplog;

import java.time.Instant;
import java.util.ArrayList;
import java.util.List;
import java.util.Set;
import java.util.TreeMap;
import java.util.concurrent.locks.ReentrantLock;

/**
 * Change streams the way a MongoDB 6.0 replica-set primary produces them, for
 * mongo-java-server (which keeps doing storage, queries and the wire protocol).
 *
 * <p>The base server calls this {@link Oplog} after each insert, update, delete and
 * collection drop; {@link ChangeStreamBackend} calls it for what the base server does not
 * report (findAndModify, dropDatabase, renameCollection, transactions) and for the
 * change-stream commands themselves. Each write becomes a {@link ChangeEvent} here; the
 * state lives in:
 * <ul>
 * <li>{@link ChangeEventLog}: the published events and the cluster clock;</li>
 * <li>{@link ShadowCopies}: a copy of every document of every user namespace, kept in
 * step with every write here, for pre-images and updateDescription;</li>
 * <li>{@link ChangeStreamTransactions}: the open multi-document transactions, whose events
 * wait for their commit;</li>
 * <li>{@link ChangeStreamBatches}: opening streams and reading the log into batches.</li>
 * </ul>
 * All of it is guarded by {@link #lock}, which the backend also holds around every write
 * command, so events are recorded in the order the writes apply.
 *
 * <p>Event documents: {@code _id} (resume token, {@link ResumeTokens}),
 * {@code operationType}, {@code clusterTime}, {@code wallTime}, {@code ns},
 * {@code documentKey}, [{@code updateDescription}], [{@code fullDocument}],
 * [{@code fullDocumentBeforeChange}], [{@code lsid}, {@code txnNumber}].
 *
 * <p>Differs from MongoDB: the token format is not MongoDB's KeyString; the history is
 * kept from server start in memory until {@link #forgetHistory} lets go of its oldest part
 * (the test server's stand-in for an oplog rolling over); a token or startAtOperationTime
 * older than what it holds is ChangeStreamHistoryLost, 286; a well-formed token of an
 * event this server never had is ChangeStreamFatalError, 280; a transaction's writes apply at once
 * and are visible to everyone before commit (no isolation, no write conflicts), only
 * their events wait for the commit; updateDescription is derived from the update spec
 * ({@link UpdateDescriptions}), truncatedArrays is always empty; pre- and post-images are
 * always available (no changeStreamPreAndPostImages collection option needed, no expiry);
 * dropping a renamed-over target shows a drop before the rename; writes made by
 * $out/$merge are not seen; there are no "create"/"createIndexes" events
 * (showExpandedEvents is ignored); local.oplog.rs is not written (every reply carries
 * operationTime instead).
 */
public final class ChangeStreamOplog implements Oplog {

    private static final Set<String> INTERNAL_DATABASES = Set.of("admin", "config", "local");

    final ReentrantLock lock = new ReentrantLock();
    final ChangeStreamTransactions transactions;
    final ChangeStreamBatches batches;
    private final ChangeStreamBackend backend;
    private final ChangeEventLog log = new ChangeEventLog();
    private final ShadowCopies shadow = new ShadowCopies();

    ChangeStreamOplog(ChangeStreamBackend backend, CursorRegistry cursorRegistry) {
        this.backend = backend;
        this.transactions = new ChangeStreamTransactions(lock, log, shadow, backend);
        this.batches = new ChangeStreamBatches(lock, log, shadow, cursorRegistry);
    }

    /** The cluster time now: that of the newest event (or the server start). */
    BsonTimestamp clusterTime() {
        return new BsonTimestamp(log.lastTs());
    }

    Instant lastWriteDate() {
        return log.lastWall();
    }

    /**
     * The events older than {@code before} forgotten (all so far when null), as a capped
     * oplog rolls over: returns how many went and the history's start after it.
     */
    Document forgetHistory(BsonTimestamp before) {
        long ts = before != null ? before.getValue() : log.lastTs() + 1;
        int gone = log.forgetBefore(ts);
        return new Document("forgotten", gone).append("historyStart", new BsonTimestamp(log.historyStart()));
    }

    // ------------------------------------------------------------------ namespaces

    /** Whether writes to {@code ns} make events: not in admin/config/local, not system.* or a '$' name. */
    static boolean tracked(String ns) {
        int dot = ns.indexOf('.');
        if (dot <= 0) {
            return false;
        }
        String db = ns.substring(0, dot);
        String coll = ns.substring(dot + 1);
        return !INTERNAL_DATABASES.contains(db) && !coll.startsWith("system.") && !coll.contains("$");
    }

    static boolean isInternalDatabase(String db) {
        return INTERNAL_DATABASES.contains(db);
    }

    /** The stored document {@code id} of a collection, or null (also for no collection). */
    static Document lookup(MongoCollection<?> collection, Object id) {
        if (collection == null) {
            return null;
        }
        for (Document document : collection.handleQuery(new Document("_id", id), 0, 1)) {
            return document;
        }
        return null;
    }

    // ------------------------------------------------------------------ recording

    private void record(ChangeEvent event, ChangeStreamTransactions.Undo undo) {
        if (!transactions.hold(event, undo)) {
            log.publish(List.of(event));
        }
    }

    private void recordInsert(String ns, Object id, Document image) {
        shadow.docs(ns).put(id, image);
        ChangeEvent event = new ChangeEvent("insert", ns, id, true);
        event.postImage = image;
        record(event, new ChangeStreamTransactions.Undo(ns, id, null, true));
    }

    private void recordChange(String ns, Object id, Object updateSpec, Document before, Document image) {
        shadow.docs(ns).put(id, image);
        boolean operators = UpdateDescriptions.isOperatorUpdate(updateSpec);
        ChangeEvent event = new ChangeEvent(operators ? "update" : "replace", ns, id, true);
        event.postImage = image;
        event.preImage = before;
        if (operators) {
            event.updateDescription = UpdateDescriptions.describeUpdate((Document) updateSpec, before, image);
        }
        record(event, new ChangeStreamTransactions.Undo(ns, id, before, true));
    }

    private void recordDelete(String ns, Object id) {
        Document before = shadow.docs(ns).remove(id);
        ChangeEvent event = new ChangeEvent("delete", ns, id, true);
        event.preImage = before;
        record(event, new ChangeStreamTransactions.Undo(ns, id, before, false));
    }

    @Override
    public void handleInsert(String namespace, List<Document> documents) {
        if (!tracked(namespace)) {
            return;
        }
        lock.lock();
        try {
            MongoCollection<?> collection = backend.findCollection(namespace);
            TreeMap<Object, Document> docs = shadow.docs(namespace);
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
            TreeMap<Object, Document> docs = shadow.docs(namespace);
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
            shadow.drop(namespace);
            log.publish(List.of(new ChangeEvent("drop", namespace, null, false)));
        } finally {
            lock.unlock();
        }
    }

    /** How many events have been published (to see whether a command produced any). */
    int eventCount() {
        lock.lock();
        try {
            return log.size();
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
            shadow.dropDatabase(db);
            log.publish(List.of(new ChangeEvent("dropDatabase", db, null, false)));
        } finally {
            lock.unlock();
        }
    }

    /** After a successful renameCollection. */
    void recordRename(String from, String to) {
        lock.lock();
        try {
            shadow.rename(from, to, tracked(to));
            if (!tracked(from)) {
                return;
            }
            ChangeEvent event = new ChangeEvent("rename", from, null, false);
            int dot = to.indexOf('.');
            event.toDb = to.substring(0, dot);
            event.toColl = to.substring(dot + 1);
            log.publish(List.of(event));
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
            Document before = shadow.docs(ns).get(id);
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
            TreeMap<Object, Document> docs = shadow.docs(ns);
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


    /** Oplog interface: a collection stream opened through the base server's code. */
    @Override
    public Cursor createCursor(Document changeStreamDocument, String namespace, Aggregation aggregation) {
        int dot = namespace.indexOf('.');
        return batches.open(namespace.substring(0, dot), namespace.substring(dot + 1), namespace, changeStreamDocument,
            aggregation);
    }
}
