import de.bwaldvogel.mongo.backend.ValueComparator;
import de.bwaldvogel.mongo.bson.Document;

import java.util.HashMap;
import java.util.Map;
import java.util.TreeMap;

/**
 * A copy of every document of every tracked namespace, kept in step with every write by
 * {@link ChangeStreamOplog}. The base server tells its oplog only which documents a write
 * touched, not what they were: these copies give exact pre-images
 * (fullDocumentBeforeChange), the old values updateDescription compares against, and
 * updateLookup's current document.
 * Guarded by the oplog's lock.
 */
final class ShadowCopies {

    private final Map<String, TreeMap<Object, Document>> copies = new HashMap<>();

    /** The namespace's copies by _id (in BSON order), created empty on first use. */
    TreeMap<Object, Document> docs(String ns) {
        return copies.computeIfAbsent(ns, k -> new TreeMap<>(ValueComparator.ascWithoutListHandling()));
    }

    /** The current copy of one document, or null; creates nothing. */
    Document current(String ns, Object id) {
        TreeMap<Object, Document> docs = copies.get(ns);
        return docs == null ? null : docs.get(id);
    }

    void drop(String ns) {
        copies.remove(ns);
    }

    void dropDatabase(String db) {
        copies.keySet().removeIf(ns -> ns.startsWith(db + "."));
    }

    /** The target's old copies go; {@code from}'s move to it if {@code keep} (a tracked target). */
    void rename(String from, String to, boolean keep) {
        TreeMap<Object, Document> moved = copies.remove(from);
        copies.remove(to);
        if (moved != null && keep) {
            copies.put(to, moved);
        }
    }
}
