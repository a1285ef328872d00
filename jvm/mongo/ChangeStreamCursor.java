import de.bwaldvogel.mongo.backend.AbstractCursor;
import de.bwaldvogel.mongo.backend.aggregation.Aggregation;
import de.bwaldvogel.mongo.bson.Document;

import java.util.List;

/**
 * One open change stream (see {@link ChangeStreamBatches}): its scope, its options, and
 * where it is in the event log ({@link ChangeEventLog}). Registered in the backend's
 * shared CursorRegistry, so killCursors finds it; getMore on it is answered by
 * {@link ChangeStreamBackend} (which adds postBatchResumeToken). All fields are guarded by
 * the oplog's lock.
 */
final class ChangeStreamCursor extends AbstractCursor {

    /** Database watched; null for the whole deployment. */
    final String db;
    /** Collection watched; null for a database or the deployment. */
    final String coll;
    /** The "ns" of the cursor replies: db.coll, db.$cmd.aggregate or admin.$cmd.aggregate. */
    final String replyNs;
    /** "default", "updateLookup", "whenAvailable" or "required". */
    final String fullDocument;
    /** "off", "whenAvailable" or "required". */
    final String fullDocumentBeforeChange;
    /** The pipeline stages after $changeStream, or null when there are none. */
    final Aggregation stages;
    private final ChangeStreamBatches batches;

    /** Index in the event log of the next event to look at. */
    int position;
    /** The resume token of the last event scanned (postBatchResumeToken). */
    long tokenTs;
    long tokenIdx;
    boolean tokenInvalidate;
    /** An invalidating event was returned: the invalidate comes next, then the end. */
    ChangeEvent invalidator;
    boolean finished;

    ChangeStreamCursor(long id, ChangeStreamBatches batches, String db, String coll, String replyNs,
                       String fullDocument, String fullDocumentBeforeChange, Aggregation stages) {
        super(id);
        this.batches = batches;
        this.db = db;
        this.coll = coll;
        this.replyNs = replyNs;
        this.fullDocument = fullDocument;
        this.fullDocumentBeforeChange = fullDocumentBeforeChange;
        this.stages = stages;
    }

    /** Whether the event belongs to this stream's scope. */
    boolean matches(ChangeEvent event) {
        if (db == null) {
            return true;
        }
        if (!db.equals(event.db)) {
            return false;
        }
        if (coll == null) {
            return true;
        }
        return coll.equals(event.coll) && !event.op.equals("dropDatabase");
    }

    /** Whether the event (already known to match) ends this stream. */
    boolean invalidatedBy(ChangeEvent event) {
        if (db == null) {
            return false;
        }
        if (coll == null) {
            return event.op.equals("dropDatabase");
        }
        return event.op.equals("drop") || event.op.equals("rename");
    }

    @Override
    public boolean isEmpty() {
        return finished;
    }

    /** Used only if the base server's own aggregate/getMore code reaches this cursor. */
    @Override
    public List<Document> takeDocuments(int numberToReturn) {
        return batches.nextBatch(this, numberToReturn).documents;
    }
}
