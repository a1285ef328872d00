import de.bwaldvogel.mongo.backend.ValueComparator;

import java.util.ArrayList;
import java.util.Iterator;
import java.util.List;
import java.util.Map;
import java.util.NavigableMap;
import java.util.NoSuchElementException;

/**
 * Document positions in `_id` order: the union of views of the `_id` index's sorted keys
 * (one per branch of an {@code $or}), merged key by key and read only as far as the
 * caller goes, so a query sorted by `_id` with a skip and a limit walks no further than a
 * MongoDB index scan would.
 */
final class IdOrderedPositions implements Iterable<Integer> {

    private final List<NavigableMap<Object, Integer>> spans;

    /** The union of `spans` (views of the index's keys), in key order. */
    IdOrderedPositions(List<NavigableMap<Object, Integer>> spans) {
        this.spans = spans;
    }

    @Override
    public Iterator<Integer> iterator() {
        return merge(spans);
    }

    private static Iterator<Integer> merge(List<NavigableMap<Object, Integer>> spans) {
        List<NavigableMap<Object, Integer>> present = new ArrayList<>();
        for (NavigableMap<Object, Integer> span : spans) {
            if (!span.isEmpty()) {
                present.add(span);
            }
        }
        if (present.size() == 1) {
            return present.get(0).values().iterator();  // nothing to merge: no comparisons
        }
        List<Iterator<Map.Entry<Object, Integer>>> cursors = new ArrayList<>();
        for (NavigableMap<Object, Integer> span : present) {
            cursors.add(span.entrySet().iterator());
        }
        return new Merge(cursors);
    }

    /** The smallest head among the cursors, each key once (branches of an {@code $or} overlap). */
    private static final class Merge implements Iterator<Integer> {
        private final List<Iterator<Map.Entry<Object, Integer>>> cursors;
        private final List<Map.Entry<Object, Integer>> heads = new ArrayList<>();
        private final ValueComparator order = ValueComparator.asc();

        Merge(List<Iterator<Map.Entry<Object, Integer>>> cursors) {
            this.cursors = cursors;
            for (Iterator<Map.Entry<Object, Integer>> cursor : cursors) {
                heads.add(cursor.hasNext() ? cursor.next() : null);
            }
        }

        @Override
        public boolean hasNext() {
            for (Map.Entry<Object, Integer> head : heads) {
                if (head != null) {
                    return true;
                }
            }
            return false;
        }

        @Override
        public Integer next() {
            Map.Entry<Object, Integer> least = null;
            for (Map.Entry<Object, Integer> head : heads) {
                if (head != null && (least == null || order.compare(head.getKey(), least.getKey()) < 0)) {
                    least = head;
                }
            }
            if (least == null) {
                throw new NoSuchElementException();
            }
            Object key = least.getKey();
            for (int i = 0; i < heads.size(); i++) {
                Map.Entry<Object, Integer> head = heads.get(i);
                if (head != null && order.compare(head.getKey(), key) == 0) {
                    Iterator<Map.Entry<Object, Integer>> cursor = cursors.get(i);
                    heads.set(i, cursor.hasNext() ? cursor.next() : null);
                }
            }
            return least.getValue();
        }
    }
}
