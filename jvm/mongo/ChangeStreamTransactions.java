import de.bwaldvogel.mongo.MongoCollection;
import de.bwaldvogel.mongo.backend.ArrayFilters;
import de.bwaldvogel.mongo.bson.Document;
import de.bwaldvogel.mongo.exception.MongoServerError;
import de.bwaldvogel.mongo.oplog.NoopOplog;

import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import java.util.concurrent.locks.ReentrantLock;

/**
 * The open multi-document transactions, (lsid, txnNumber) with autocommit: false. Their
 * events are held until commitTransaction and then published as one group sharing one
 * clusterTime; abortTransaction undoes their writes in the store and the shadow copies.
 *
 * <p>Differs from MongoDB: a transaction's writes apply at once and are visible to
 * everyone before commit (no isolation, no write conflicts); only their events wait for
 * the commit. {@link ChangeStreamBackend} marks the thread running a transaction's command
 * ({@link #setCurrent}), so the oplog's recording, which the base server calls without
 * the command, can tell the transaction's writes from others.
 */
final class ChangeStreamTransactions {

    /** A write of an open transaction, to undo on abort. */
    static final class Undo {
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
        final List<ChangeEvent> events = new ArrayList<>();
        final List<Undo> undo = new ArrayList<>();
        String state = "active";

        Txn(Document lsid, long txnNumber, String lsidKey) {
            this.lsid = lsid;
            this.txnNumber = txnNumber;
            this.lsidKey = lsidKey;
        }
    }

    private final ReentrantLock lock;
    private final ChangeEventLog log;
    private final ShadowCopies shadow;
    private final ChangeStreamBackend backend;
    private final Map<String, Txn> transactions = new HashMap<>();
    private final ThreadLocal<Txn> currentTxn = new ThreadLocal<>();

    ChangeStreamTransactions(ReentrantLock lock, ChangeEventLog log, ShadowCopies shadow,
                             ChangeStreamBackend backend) {
        this.lock = lock;
        this.log = log;
        this.shadow = shadow;
        this.backend = backend;
    }

    /**
     * If this thread runs a transaction's command: keeps the write's event until the
     * commit and how to undo the write for an abort, and returns true; else false (the
     * caller publishes the event now). Called under the lock.
     */
    boolean hold(ChangeEvent event, Undo undo) {
        Txn txn = currentTxn.get();
        if (txn == null) {
            return false;
        }
        event.lsid = txn.lsid;
        event.txnNumber = txn.txnNumber;
        txn.events.add(event);
        txn.undo.add(undo);
        return true;
    }

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
                log.publish(txn.events);
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
            TreeMap<Object, Document> docs = shadow.docs(undo.ns);
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
                if (ChangeStreamOplog.lookup(collection, undo.id) == null) {
                    collection.insertDocuments(List.of(undo.before.cloneDeeply()), true);
                }
                docs.put(undo.id, undo.before);
            }
        }
        txn.undo.clear();
        txn.events.clear();
        txn.state = "aborted";
    }
}
