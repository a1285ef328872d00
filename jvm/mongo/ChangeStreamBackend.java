import de.bwaldvogel.mongo.MongoCollection;
import de.bwaldvogel.mongo.MongoDatabase;
import de.bwaldvogel.mongo.backend.Cursor;
import de.bwaldvogel.mongo.backend.Utils;
import de.bwaldvogel.mongo.backend.aggregation.Aggregation;
import de.bwaldvogel.mongo.backend.memory.MemoryBackend;
import de.bwaldvogel.mongo.backend.memory.MemoryDatabase;
import de.bwaldvogel.mongo.bson.BsonTimestamp;
import de.bwaldvogel.mongo.bson.Document;
import de.bwaldvogel.mongo.bson.ObjectId;
import de.bwaldvogel.mongo.exception.CursorNotFoundException;
import de.bwaldvogel.mongo.exception.MongoServerError;
import de.bwaldvogel.mongo.oplog.Oplog;
import io.netty.channel.Channel;

import java.util.List;
import java.util.Locale;
import java.util.Set;

/**
 * mongo-java-server's in-memory backend presented as the primary of a one-member replica
 * set ("rs0") with change streams as MongoDB 6.0 has them ({@link ChangeStreamOplog}).
 *
 * <p>What this adds to the base server's command handling:
 * <ul>
 * <li>isMaster/ismaster and hello (which the base lacks) answer as a replica-set primary:
 * setName, hosts, primary, me, secondary: false, isWritablePrimary, electionId,
 * setVersion, lastWrite, logicalSessionTimeoutMinutes: 30, helloOk when asked; no
 * topologyVersion (so drivers poll instead of streaming hello).</li>
 * <li>every successful reply carries operationTime (the cluster time of the newest
 * event); no $clusterTime is sent (drivers then do not gossip it back).</li>
 * <li>aggregate with a leading $changeStream, at collection (aggregate: "coll"),
 * database (aggregate: 1) and deployment scope (aggregate: 1 on admin with
 * allChangesForCluster: true); replies and getMores carry postBatchResumeToken.
 * getMore never waits (maxTimeMS/awaitData are ignored: an idle stream returns an empty
 * batch at once).</li>
 * <li>multi-document transactions (lsid, txnNumber, autocommit: false; commitTransaction,
 * abortTransaction): see {@link ChangeStreamTransactions}. No isolation: the writes apply
 * at once.</li>
 * <li>change events for findAndModify, dropDatabase and renameCollection, which the base
 * server does not pass to its oplog; collMod answers ok to any option (e.g.
 * changeStreamPreAndPostImages) of an existing collection and changes nothing.</li>
 * </ul>
 *
 * <p>Writes and change-stream reads are serialised by one lock (the oplog's), so events
 * are recorded in the order the writes apply; plain reads (find, count, ...) do not take it.
 */
public class ChangeStreamBackend extends MemoryBackend {

    private static final String SET_NAME = "rs0";

    /** Commands that neither write nor read change streams: run without the write lock. */
    private static final Set<String> UNLOCKED = Set.of(
        "find", "count", "distinct", "listcollections", "listindexes", "listdatabases", "ismaster", "hello",
        "ping", "buildinfo", "whatsmyuri", "serverstatus", "dbstats", "collstats", "killcursors", "endsessions",
        "getlog", "hostinfo", "connectionstatus", "getcmdlineopts", "getfreemonitoringstatus", "validate",
        "getlasterror", "reseterror");

    private final String hostPort;
    private final ObjectId electionId = new ObjectId();
    private final ChangeStreamOplog changeStreams;

    public ChangeStreamBackend(String hostPort) {
        this.hostPort = hostPort;
        this.changeStreams = new ChangeStreamOplog(this, getCursorRegistry());
        enableOplog();
    }

    @Override
    public MemoryDatabase openOrCreateDatabase(String databaseName) {
        return new RangeIndexedDatabase(databaseName, getCursorRegistry());
    }

    @Override
    protected Oplog createOplog() {
        return changeStreams;
    }

    @Override
    public void disableOplog() {
        // change streams are what this backend is for: keep them on
    }

    // ------------------------------------------------------------------ helpers for the oplog

    /** The collection of a namespace, without creating its database. */
    MongoCollection<?> findCollection(String ns) {
        int dot = ns.indexOf('.');
        String db = ns.substring(0, dot);
        if (!listDatabaseNames().contains(db)) {
            return null;
        }
        return resolveDatabase(db).resolveCollection(ns.substring(dot + 1), false);
    }

    MongoCollection<?> findOrCreateCollection(String ns) {
        int dot = ns.indexOf('.');
        MongoDatabase database = resolveDatabase(ns.substring(0, dot));
        MongoCollection<?> collection = database.resolveCollection(ns.substring(dot + 1), false);
        return collection != null ? collection : database.createCollectionOrThrowIfExists(ns.substring(dot + 1));
    }

    // ------------------------------------------------------------------ commands

    @Override
    public Document handleCommand(Channel channel, String databaseName, String command, Document query) {
        String name = command.toLowerCase(Locale.ROOT);
        Document reply;
        if (UNLOCKED.contains(name)) {
            reply = dispatch(channel, databaseName, command, name, query);
        } else if (name.equals("getmore")) {
            reply = getMore(channel, databaseName, command, query);
        } else {
            changeStreams.lock.lock();
            try {
                reply = dispatch(channel, databaseName, command, name, query);
            } finally {
                changeStreams.lock.unlock();
            }
        }
        if (reply != null && isOk(reply) && !reply.containsKey("operationTime")) {
            reply.put("operationTime", changeStreams.clusterTime());
        }
        return reply;
    }

    private static boolean isOk(Document reply) {
        Object ok = reply.get("ok");
        return ok instanceof Number && ((Number) ok).doubleValue() == 1.0;
    }

    private Document dispatch(Channel channel, String db, String command, String name, Document query) {
        switch (name) {
            case "ismaster":
            case "hello":
                return hello(channel, db, name.equals("hello"), query);
            case "committransaction":
                changeStreams.transactions.commit(query);
                return ok();
            case "aborttransaction":
                changeStreams.transactions.abort(query);
                return ok();
            case "aggregate":
                if (isChangeStream(query)) {
                    return openChangeStream(db, query);
                }
                break;
            case "collmod":
                return collMod(db, command, query);
            case "forgetchangehistory":
                return forgetChangeHistory(db, query);
            default:
                break;
        }
        ChangeStreamTransactions.Txn txn = changeStreams.transactions.transactionOf(name, query);
        if (txn != null) {
            changeStreams.transactions.setCurrent(txn);
        }
        try {
            switch (name) {
                case "findandmodify":
                    return findAndModify(channel, db, command, query);
                case "dropdatabase":
                    return dropDatabase(channel, db, command, query);
                case "renamecollection":
                    return renameCollection(channel, db, command, query);
                default:
                    return super.handleCommand(channel, db, command, query);
            }
        } finally {
            if (txn != null) {
                changeStreams.transactions.clearCurrent();
            }
        }
    }

    /**
     * {@code {forgetChangeHistory: 1, before: Timestamp}} on admin: the change events older
     * than {@code before} (all so far without it) are forgotten, as when a capped oplog rolls
     * over. MongoDB has no such command (its oplog rolls over by size); the test server keeps
     * its history in memory, and a benchmark that loads millions of documents frees it so.
     */
    private Document forgetChangeHistory(String db, Document query) {
        if (!db.equals("admin")) {
            throw new MongoServerError(13, "Unauthorized",
                "forgetChangeHistory may only be run against the admin database.");
        }
        Object before = query.get("before");
        if (before != null && !(before instanceof BsonTimestamp)) {
            throw new MongoServerError(14, "TypeMismatch",
                "BSON field 'forgetChangeHistory.before' is the wrong type, expected type 'timestamp'");
        }
        Document reply = changeStreams.forgetHistory((BsonTimestamp) before);
        Utils.markOkay(reply);
        return reply;
    }

    private static Document ok() {
        Document reply = new Document();
        Utils.markOkay(reply);
        return reply;
    }

    // ------------------------------------------------------------------ replica-set identity

    private Document hello(Channel channel, String db, boolean hello, Document query) {
        Document base = super.handleCommand(channel, db, "ismaster", query);
        BsonTimestamp now = changeStreams.clusterTime();
        Document opTime = new Document("ts", now).append("t", 1L);
        Document reply = new Document();
        if (Utils.isTrue(query.get("helloOk"))) {
            reply.append("helloOk", true);
        }
        reply.append(hello ? "isWritablePrimary" : "ismaster", true)
            .append("hosts", List.of(hostPort))
            .append("setName", SET_NAME)
            .append("setVersion", 1)
            .append("secondary", false)
            .append("primary", hostPort)
            .append("me", hostPort)
            .append("electionId", electionId)
            .append("lastWrite", new Document("opTime", opTime)
                .append("lastWriteDate", changeStreams.lastWriteDate())
                .append("majorityOpTime", opTime)
                .append("majorityWriteDate", changeStreams.lastWriteDate()))
            .append("maxBsonObjectSize", base.get("maxBsonObjectSize"))
            .append("maxMessageSizeBytes", base.get("maxMessageSizeBytes"))
            .append("maxWriteBatchSize", base.get("maxWriteBatchSize"))
            .append("localTime", base.get("localTime"))
            .append("logicalSessionTimeoutMinutes", 30)
            .append("minWireVersion", base.get("minWireVersion"))
            .append("maxWireVersion", base.get("maxWireVersion"))
            .append("readOnly", false);
        Utils.markOkay(reply);
        return reply;
    }

    // ------------------------------------------------------------------ change streams

    private static boolean isChangeStream(Document query) {
        Object pipeline = query.get("pipeline");
        if (!(pipeline instanceof List<?>) || ((List<?>) pipeline).isEmpty()) {
            return false;
        }
        Object first = ((List<?>) pipeline).get(0);
        return first instanceof Document && ((Document) first).containsKey("$changeStream");
    }

    private Document openChangeStream(String db, Document query) {
        List<Document> pipeline = Aggregation.parse(query.get("pipeline"));
        Object specObject = pipeline.get(0).get("$changeStream");
        if (!(specObject instanceof Document)) {
            throw new MongoServerError(14, "TypeMismatch", "the $changeStream stage specification must be an object");
        }
        Document spec = (Document) specObject;
        Object cursorOption = query.get("cursor");
        if (!(cursorOption instanceof Document)) {
            throw new MongoServerError(9, "FailedToParse",
                "The 'cursor' option is required, except for aggregate with the explain argument");
        }
        Object target = query.get("aggregate");
        boolean cluster = Utils.isTrue(spec.get("allChangesForCluster"));
        String scopeDb;
        String scopeColl;
        String replyNs;
        if (target instanceof String) {
            if (ChangeStreamOplog.isInternalDatabase(db) || ((String) target).startsWith("system.") || cluster) {
                throw new MongoServerError(73, "InvalidNamespace",
                    "$changeStream may not be opened on the internal " + db + "." + target + " collection");
            }
            scopeDb = db;
            scopeColl = (String) target;
            replyNs = db + "." + target;
        } else if (target instanceof Number && ((Number) target).intValue() == 1) {
            if (db.equals("admin")) {
                if (!cluster) {
                    throw new MongoServerError(73, "InvalidNamespace",
                        "$changeStream may not be opened on the internal admin database");
                }
                scopeDb = null;
            } else {
                if (cluster) {
                    throw new MongoServerError(40415, "Location40415",
                        "A $changeStream with 'allChangesForCluster:true' may only be opened on the 'admin' database");
                }
                if (ChangeStreamOplog.isInternalDatabase(db)) {
                    throw new MongoServerError(73, "InvalidNamespace",
                        "$changeStream may not be opened on the internal " + db + " database");
                }
                scopeDb = db;
            }
            scopeColl = null;
            replyNs = db + ".$cmd.aggregate";
        } else {
            throw new MongoServerError(73, "InvalidNamespace", "Invalid aggregate namespace: " + target);
        }
        Aggregation stages = null;
        if (pipeline.size() > 1) {
            stages = Aggregation.fromPipeline(pipeline.subList(1, pipeline.size()), this::resolveDatabase,
                resolveDatabase(db), null, changeStreams);
        }
        ChangeStreamCursor cursor = changeStreams.batches.open(scopeDb, scopeColl, replyNs, spec, stages);
        ChangeStreamBatches.Batch batch = changeStreams.batches.nextBatch(cursor,
            ChangeStreamBatches.firstBatchSize((Document) cursorOption), true);
        if (batch.finished) {
            getCursorRegistry().remove(cursor);
        }
        return cursorReply("firstBatch", replyNs, batch, batch.finished ? 0L : cursor.getId());
    }

    private Document getMore(Channel channel, String db, String command, Document query) {
        Object idObject = query.get(command);
        Cursor cursor = null;
        if (idObject instanceof Number) {
            try {
                cursor = getCursorRegistry().getCursor(((Number) idObject).longValue());
            } catch (CursorNotFoundException e) {
                cursor = null;
            }
        }
        if (!(cursor instanceof ChangeStreamCursor)) {
            return super.handleCommand(channel, db, command, query);
        }
        ChangeStreamCursor stream = (ChangeStreamCursor) cursor;
        Object batchSize = query.get("batchSize");
        int limit = batchSize instanceof Number ? ((Number) batchSize).intValue() : 0;
        ChangeStreamBatches.Batch batch = changeStreams.batches.nextBatch(stream, limit);
        if (batch.finished) {
            getCursorRegistry().remove(stream);
        }
        return cursorReply("nextBatch", stream.replyNs, batch, batch.finished ? 0L : stream.getId());
    }

    private static Document cursorReply(String key, String ns, ChangeStreamBatches.Batch batch, long id) {
        Document cursor = new Document(key, batch.documents)
            .append("postBatchResumeToken", batch.postBatchResumeToken)
            .append("id", id)
            .append("ns", ns);
        Document reply = new Document("cursor", cursor);
        Utils.markOkay(reply);
        return reply;
    }

    // ------------------------------------------------------------------ writes the base oplog misses

    private Document findAndModify(Channel channel, String db, String command, Document query) {
        String collectionName = String.valueOf(query.get(command));
        String ns = db + "." + collectionName;
        MongoCollection<?> collection = findCollection(ns);
        Object matchedId = null;
        boolean matched = false;
        if (collection != null) {
            Document selector = new Document("query", query.getOrDefault("query", new Document()));
            if (query.containsKey("sort")) {
                selector.put("orderby", query.get("sort"));
            }
            for (Document document : collection.handleQuery(selector, 0, 1)) {
                matchedId = document.get("_id");
                matched = true;
            }
        }
        Document reply = super.handleCommand(channel, db, command, query);
        if (!isOk(reply)) {
            return reply;
        }
        if (matched) {
            changeStreams.afterFindAndModify(ns, matchedId, query.get("update"));
        } else if (Utils.isTrue(query.get("upsert")) && !Utils.isTrue(query.get("remove"))) {
            changeStreams.afterFindAndModifyUpsert(ns, reply.get("value"));
        }
        return reply;
    }

    private Document dropDatabase(Channel channel, String db, String command, Document query) {
        int before = changeStreams.eventCount();
        Document reply = super.handleCommand(channel, db, command, query);
        if (changeStreams.eventCount() > before && isOk(reply)) { // it had collections: MongoDB's "exists"
            changeStreams.recordDropDatabase(db);
        }
        return reply;
    }

    private Document renameCollection(Channel channel, String db, String command, Document query) {
        Document reply = super.handleCommand(channel, db, command, query);
        String from = String.valueOf(query.get(command));
        String to = String.valueOf(query.get("to"));
        if (isOk(reply) && !from.equals(to)) {
            changeStreams.recordRename(from, to);
        }
        return reply;
    }

    private Document collMod(String db, String command, Document query) {
        String ns = db + "." + query.get(command);
        if (findCollection(ns) == null) {
            throw new MongoServerError(26, "NamespaceNotFound", "ns does not exist: " + ns);
        }
        return ok();
    }
}
