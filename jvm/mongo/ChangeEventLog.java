import java.time.Instant;
import java.util.ArrayList;
import java.util.List;

/**
 * The published change events, in memory from server start, ordered by (clusterTime,
 * index in transaction), and the cluster clock that stamps them. A stream's start is
 * found by binary search, so a getMore costs what it returns (plus the events of other
 * namespaces it skips). Guarded by the oplog's lock, except the clock's reads
 * ({@link #lastTs()}, {@link #lastWall()}), which every reply makes without the lock.
 */
final class ChangeEventLog {

    /** The cluster time of server start: older resume points are history lost. */
    final long historyStart;
    private volatile long lastTs;
    private volatile Instant lastWall;
    private final ArrayList<ChangeEvent> events = new ArrayList<>();

    ChangeEventLog() {
        long seconds = System.currentTimeMillis() / 1000;
        this.historyStart = seconds << 32;
        this.lastTs = historyStart;
        this.lastWall = Instant.now();
    }

    /** The cluster time of the newest event (or the server start). */
    long lastTs() {
        return lastTs;
    }

    Instant lastWall() {
        return lastWall;
    }

    int size() {
        return events.size();
    }

    ChangeEvent get(int index) {
        return events.get(index);
    }

    /** Appends events as one group: one clusterTime, indexes 0, 1, ... (a transaction's commit). */
    void publish(List<ChangeEvent> group) {
        if (group.isEmpty()) {
            return;
        }
        long ts = tick();
        Instant wall = lastWall;
        long idx = 0;
        for (ChangeEvent event : group) {
            event.ts = ts;
            event.idx = idx++;
            event.wall = wall;
            events.add(event);
        }
    }

    /** First index of an event whose key is greater than (ts, idx). */
    int firstAfter(long ts, long idx) {
        int lo = 0;
        int hi = events.size();
        while (lo < hi) {
            int mid = (lo + hi) >>> 1;
            ChangeEvent e = events.get(mid);
            if (ResumeTokens.compareKey(e.ts, e.idx, ts, idx) <= 0) {
                lo = mid + 1;
            } else {
                hi = mid;
            }
        }
        return lo;
    }

    /**
     * The next clusterTime: increment 1 of a new second, else the last one's + 1 (also if
     * the wall clock went back), so cluster times never repeat or go back.
     */
    private long tick() {
        long nowSeconds = System.currentTimeMillis() / 1000;
        long ts = lastTs;
        if (nowSeconds > (ts >>> 32)) {
            ts = (nowSeconds << 32) | 1;
        } else {
            ts = ts + 1;
        }
        lastWall = Instant.now();
        lastTs = ts;
        return ts;
    }
}
