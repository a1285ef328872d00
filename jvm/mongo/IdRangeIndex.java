import de.bwaldvogel.mongo.backend.IndexKey;
import de.bwaldvogel.mongo.backend.KeyValue;
import de.bwaldvogel.mongo.backend.ValueComparator;
import de.bwaldvogel.mongo.backend.memory.index.MemoryUniqueIndex;
import de.bwaldvogel.mongo.bson.Document;

import java.util.ArrayList;
import java.util.List;
import java.util.NavigableMap;
import java.util.Set;
import java.util.TreeMap;
import java.util.concurrent.ConcurrentSkipListMap;

/**
 * The `_id` index, answering ranges too ({@code {_id: {$gt: a, $lte: b}}}, any of
 * $gt/$gte/$lt/$lte) as a MongoDB server does from its `_id` B-tree. mongo-java-server's
 * unique index answers equality and $in only, so every range query scanned and sorted the
 * whole collection: an incremental snapshot's windows, one range each, then cost a full
 * scan apiece (16 scans of a 1,000,000-document collection for 16 windows).
 *
 * <p>The index gives candidates only, in `_id` order (live views of a sorted copy of the
 * keys, ordered as MongoDB sorts values across types, read lazily); the server's matcher
 * still checks every candidate against the whole query, so a bound of one type still
 * matches that type's bracket only. Sorted by `_id`, such a query needs no sort and stops
 * at its skip and limit ({@link IdOrderedCollection}), as MongoDB's index scan does: a
 * snapshot plans its windows by skipping a chunk's worth of `_id`s at a time.
 *
 * <p>It also answers an {@code $or} of such ranges and of {@code {_id: {$type: [...]}}}
 * (a window running to either end of the key space: its range, then the type brackets
 * after or before it), as a server does with one index scan per branch, merged in `_id`
 * order. A {@code $type} branch gives the keys of its brackets or a superset of them.
 */
final class IdRangeIndex extends MemoryUniqueIndex {

    private static final Set<String> BOUNDS = Set.of("$gt", "$gte", "$lt", "$lte");
    private static final Set<String> NUMBER_TYPES = Set.of("double", "int", "long", "decimal", "number");
    private static final Object NUMBERS_FROM = Double.NEGATIVE_INFINITY;
    private static final Object STRINGS_FROM = "";

    private final ConcurrentSkipListMap<Object, Integer> sorted = new ConcurrentSkipListMap<>(ValueComparator.asc());
    private volatile Integer nullPosition;  // the document whose `_id` is null, not in `sorted`

    IdRangeIndex(String name, List<IndexKey> keys, boolean sparse) {
        super(name, keys, sparse);
    }

    @Override
    protected boolean putKeyPosition(KeyValue keyValue, Integer position) {
        boolean added = super.putKeyPosition(keyValue, position);
        if (added && keyValue.get(0) != null) {
            sorted.put(keyValue.get(0), position);
        } else if (added) {
            nullPosition = position;
        }
        return added;
    }

    @Override
    protected Integer removeDocument(KeyValue keyValue) {
        if (keyValue.get(0) != null) {
            sorted.remove(keyValue.get(0));
        } else {
            nullPosition = null;
        }
        return super.removeDocument(keyValue);
    }

    @Override
    public synchronized boolean canHandle(Document query) {
        return range(query) != null || branches(query) != null || super.canHandle(query);
    }

    @Override
    public synchronized Iterable<Integer> getPositions(Document query) {
        Document range = range(query);
        if (range != null) {
            return new IdOrderedPositions(List.of(span(range)));
        }
        List<Document> branches = branches(query);
        if (branches == null) {
            return super.getPositions(query);
        }
        List<NavigableMap<Object, Integer>> spans = new ArrayList<>();
        for (Document branch : branches) {
            Document bounds = range(branch);
            if (bounds != null) {
                spans.add(span(bounds));
            } else {
                spans.addAll(typeSpans(typeNames(branch)));
            }
        }
        return new IdOrderedPositions(spans);
    }

    /**
     * Every document in `_id` order, for {@code find({}).sort({_id: 1})}: the MinKey, the
     * null `_id`, then every other key (ValueComparator puts nothing else before the numbers).
     */
    IdOrderedPositions inOrder() {
        return new IdOrderedPositions(List.of(sorted.headMap(NUMBERS_FROM, false), nullSpan(), sorted.tailMap(NUMBERS_FROM, true)));
    }

    /**
     * Candidates for keys of the named types, by the brackets ValueComparator orders as
     * MongoDB does: the null `_id`; the numbers (from -Infinity up to the smallest string:
     * NaN sorts last among them there); every other key (the MinKey, then all from the
     * smallest string on), a superset the matcher narrows.
     */
    private List<NavigableMap<Object, Integer>> typeSpans(List<String> names) {
        List<NavigableMap<Object, Integer>> spans = new ArrayList<>();
        if (names.contains("null") || names.contains("undefined")) {
            spans.add(nullSpan());
        }
        if (names.stream().anyMatch(NUMBER_TYPES::contains)) {
            spans.add(sorted.subMap(NUMBERS_FROM, true, STRINGS_FROM, false));
        }
        if (names.stream().anyMatch(name -> !NUMBER_TYPES.contains(name) && !name.equals("null") && !name.equals("undefined"))) {
            spans.add(sorted.headMap(NUMBERS_FROM, false));
            spans.add(sorted.tailMap(STRINGS_FROM, true));
        }
        return spans;
    }

    /** The document whose `_id` is null, as a span (it is not in `sorted`). */
    private NavigableMap<Object, Integer> nullSpan() {
        NavigableMap<Object, Integer> span = new TreeMap<>(ValueComparator.asc());
        Integer position = nullPosition;
        if (position != null) {
            span.put(null, position);
        }
        return span;
    }

    /** A range's keys in `_id` order: a live view, read as far as a query needs. */
    private NavigableMap<Object, Integer> span(Document range) {
        NavigableMap<Object, Integer> span = sorted;
        Object low = range.containsKey("$gt") ? range.get("$gt") : range.get("$gte");
        Object high = range.containsKey("$lt") ? range.get("$lt") : range.get("$lte");
        if (low != null) {
            span = span.tailMap(low, range.containsKey("$gte"));
        }
        if (high != null) {
            span = span.headMap(high, range.containsKey("$lte"));
        }
        return span;
    }

    /** The branches of an {@code $or} alone whose each is a range or a {@code $type} this index answers; else null. */
    private static List<Document> branches(Document query) {
        if (query.size() != 1 || !(query.get("$or") instanceof List<?> items) || items.isEmpty()) {
            return null;
        }
        List<Document> branches = new ArrayList<>();
        for (Object item : items) {
            if (!(item instanceof Document branch) || (range(branch) == null && typeNames(branch) == null)) {
                return null;
            }
            branches.add(branch);
        }
        return branches;
    }

    /** {@code {_id: {$type: [names]}}}: its type names (aliases, not numeric codes); else null. */
    private static List<String> typeNames(Document branch) {
        if (branch.size() != 1 || !(branch.get("_id") instanceof Document condition) || condition.size() != 1) {
            return null;
        }
        Object types = condition.get("$type");
        List<?> names = types instanceof List<?> list ? list : types == null ? List.of() : List.of(types);
        List<String> found = new ArrayList<>();
        for (Object name : names) {
            if (!(name instanceof String text)) {
                return null;
            }
            found.add(text);
        }
        return found.isEmpty() ? null : found;
    }

    /** The bounds of a query on `_id` alone by $gt/$gte/$lt/$lte, not null; else null. */
    private static Document range(Document query) {
        if (query.size() != 1 || !(query.get("_id") instanceof Document bounds) || bounds.isEmpty()) {
            return null;
        }
        for (String operator : bounds.keySet()) {
            if (!BOUNDS.contains(operator) || bounds.get(operator) == null) {
                return null;
            }
        }
        if ((bounds.containsKey("$gt") && bounds.containsKey("$gte"))
            || (bounds.containsKey("$lt") && bounds.containsKey("$lte"))) {
            return null;
        }
        return bounds;
    }
}
