import de.bwaldvogel.mongo.backend.CollectionOptions;
import de.bwaldvogel.mongo.backend.CursorRegistry;
import de.bwaldvogel.mongo.backend.Index;
import de.bwaldvogel.mongo.backend.IndexKey;
import de.bwaldvogel.mongo.backend.memory.MemoryCollection;
import de.bwaldvogel.mongo.backend.memory.MemoryDatabase;

import java.util.List;

/**
 * mongo-java-server's in-memory database, its `_id` indexes answering ranges
 * ({@link IdRangeIndex}) and its collections reading them in order ({@link IdOrderedCollection}).
 */
final class RangeIndexedDatabase extends MemoryDatabase {

    RangeIndexedDatabase(String databaseName, CursorRegistry cursorRegistry) {
        super(databaseName, cursorRegistry);
    }

    @Override
    protected MemoryCollection openOrCreateCollection(String collectionName, CollectionOptions options) {
        return new IdOrderedCollection(this, collectionName, options, cursorRegistry);
    }

    @Override
    protected Index<Integer> openOrCreateUniqueIndex(
        String collectionName, String indexName, List<IndexKey> keys, boolean sparse) {
        if (keys.size() == 1 && keys.get(0).getKey().equals("_id")) {
            return new IdRangeIndex(indexName, keys, sparse);
        }
        return super.openOrCreateUniqueIndex(collectionName, indexName, keys, sparse);
    }
}
