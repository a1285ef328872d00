import de.bwaldvogel.mongo.MongoDatabase;
import de.bwaldvogel.mongo.backend.CollectionOptions;
import de.bwaldvogel.mongo.backend.CursorRegistry;
import de.bwaldvogel.mongo.backend.Index;
import de.bwaldvogel.mongo.backend.QueryResult;
import de.bwaldvogel.mongo.backend.memory.MemoryCollection;
import de.bwaldvogel.mongo.bson.Document;

import java.util.stream.Stream;
import java.util.stream.StreamSupport;

/**
 * mongo-java-server's in-memory collection, answering a query sorted by `_id` from its
 * `_id` index's order ({@link IdOrderedPositions}) instead of sorting every match: the
 * stock collection matches all candidates, sorts them, then skips, so
 * {@code find({_id: {$gt: x}}).sort({_id: 1}).skip(65535).limit(1)} cost the whole
 * collection's tail where MongoDB walks 65,536 index keys.
 */
final class IdOrderedCollection extends MemoryCollection {

    private volatile IdRangeIndex idIndex;

    IdOrderedCollection(MongoDatabase database, String name, CollectionOptions options, CursorRegistry cursors) {
        super(database, name, options, cursors);
    }

    @Override
    public void addIndex(Index<Integer> index) {
        super.addIndex(index);
        if (index instanceof IdRangeIndex ids) {
            idIndex = ids;
        }
    }

    /** The whole collection sorted by `_id` (the first window, the first boundary) from the index too. */
    @Override
    protected QueryResult queryDocuments(
        Document query, Document orderBy, int numberToSkip, int limit, int batchSize, Document fieldSelector) {
        IdRangeIndex ids = idIndex;
        if (ids != null && query.isEmpty() && byIdAscending(orderBy)) {
            return matchDocuments(query, ids.inOrder(), orderBy, numberToSkip, limit, batchSize, fieldSelector);
        }
        return super.queryDocuments(query, orderBy, numberToSkip, limit, batchSize, fieldSelector);
    }

    @Override
    protected QueryResult matchDocuments(
        Document query, Iterable<Integer> positions, Document orderBy, int numberToSkip, int limit, int batchSize,
        Document fieldSelector) {
        if (!(positions instanceof IdOrderedPositions) || !byIdAscending(orderBy)) {
            return super.matchDocuments(query, positions, orderBy, numberToSkip, limit, batchSize, fieldSelector);
        }
        Stream<Document> documents = StreamSupport.stream(positions.spliterator(), false).map(this::getDocument);
        return matchDocumentsFromStream(query, documents, numberToSkip, limit, batchSize, null, fieldSelector);
    }

    private static boolean byIdAscending(Document orderBy) {
        return orderBy != null && orderBy.size() == 1 && orderBy.get("_id") instanceof Number n && n.intValue() == 1;
    }
}
