import de.bwaldvogel.mongo.bson.Document;

import java.time.Instant;

/**
 * One change event as recorded. Streams render it to a change event document when they
 * read it ({@link ChangeStreamBatches}), because what it shows depends on each stream's
 * options. {@code ts}, {@code idx} and {@code wall} are set when it is published
 * ({@link ChangeEventLog}); a transaction's events have none until their commit.
 */
final class ChangeEvent {
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

    ChangeEvent(String op, String ns, Object id, boolean hasId) {
        this.op = op;
        int dot = ns.indexOf('.');
        this.db = dot < 0 ? ns : ns.substring(0, dot);
        this.coll = dot < 0 ? null : ns.substring(dot + 1);
        this.id = id;
        this.hasId = hasId;
    }
}
