import java.time.Instant;
import java.util.ArrayList;
import java.util.List;

/**
 * The published change events, in memory from server start, ordered by (clusterTime,
 * index in transaction), and the cluster clock that stamps them. A stream's start is
 * found by binary search, so a getMore costs what it returns (plus the events of other
 * namespaces it skips). Events keep their index for good: those before the history start
 * ({@link #forgetBefore}) are gone, the others keep their places. Guarded by the oplog's
 * lock, except the clock's reads ({@link #lastTs()}, {@link #lastWall()}), which every
 * reply makes without the lock.
 */
final class ChangeEventLog {

    /** The cluster time of server start, or the one forgotten up to: older resume points are history lost. */
    private long historyStart;
    /** How many of the oldest events were forgotten: the index of the first one kept. */
    private int forgotten;
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

    long historyStart() {
        return historyStart;
    }

    /** The index the next event will have (every event's index stays, forgotten or not). */
    int size() {
        return forgotten + events.size();
    }

    /** The index of the oldest event kept: a stream positioned before it lost its history. */
    int firstKept() {
        return forgotten;
    }

    ChangeEvent get(int index) {
        return events.get(index - forgotten);
    }

    /**
     * Forgets the events older than cluster time {@code ts}, as a capped oplog's rollover
     * does (MongoDB's oplog is a capped collection): resume points before it become
     * ChangeStreamHistoryLost. Returns how many events went.
     */
    int forgetBefore(long ts) {
        if (Long.compareUnsigned(ts, historyStart) <= 0) {
            return 0; // nothing is older than the history's start
        }
        int gone = firstAfter(ts - 1, ResumeTokens.HIGH_WATER) - forgotten;
        events.subList(0, gone).clear();
        events.trimToSize();
        forgotten += gone;
        if (Long.compareUnsigned(ts, historyStart) > 0) {
            historyStart = ts;
        }
        return gone;
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
        return forgotten + lo;
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
