import de.bwaldvogel.mongo.bson.Document;
import de.bwaldvogel.mongo.exception.MongoServerError;

/**
 * Resume tokens of this server: {@code {_data: hex}} with 16 hex digits of the
 * clusterTime (seconds &lt;&lt; 32 | increment), 8 of the event's index in its transaction
 * (0 otherwise; ffffffff in a "high-water mark" token that stands for "after everything up
 * to this clusterTime", as postBatchResumeToken of an idle stream), and "01" appended for
 * an invalidate event. Tokens order as the events do (also as strings).
 *
 * <p>This is not MongoDB's KeyString format; clients treat resume tokens as opaque.
 */
final class ResumeTokens {

    /** The index of a high-water mark token: after every event of its clusterTime. */
    static final long HIGH_WATER = 0xFFFFFFFFL;

    private ResumeTokens() {}

    static String tokenString(long ts, long idx, boolean invalidate) {
        return String.format("%016x%08x", ts, idx) + (invalidate ? "01" : "");
    }

    static Document token(long ts, long idx, boolean invalidate) {
        return new Document("_data", tokenString(ts, idx, invalidate));
    }

    /** Orders (clusterTime, index) keys; the clusterTime is unsigned, as BSON timestamps are. */
    static int compareKey(long ts1, long idx1, long ts2, long idx2) {
        int c = Long.compareUnsigned(ts1, ts2);
        return c != 0 ? c : Long.compare(idx1, idx2);
    }

    /** {ts, idx, invalidate?1:0} of a resume token, or error 260 InvalidResumeToken. */
    static long[] parseToken(Object token, String option) {
        if (!(token instanceof Document)) {
            throw new MongoServerError(260, "InvalidResumeToken",
                "the " + option + " resume token must be an object with a string '_data'");
        }
        Object data = ((Document) token).get("_data");
        if (!(data instanceof String) || ((Document) token).size() != 1) {
            throw new MongoServerError(260, "InvalidResumeToken",
                "malformed resume token " + token + ": expected {_data: <hex string>}");
        }
        String hex = (String) data;
        boolean okLength = hex.length() == 24 || (hex.length() == 26 && hex.endsWith("01"));
        if (!okLength || !hex.chars().allMatch(ch -> Character.digit(ch, 16) >= 0)) {
            throw new MongoServerError(260, "InvalidResumeToken",
                "malformed resume token " + token + ": not a token of this server");
        }
        long ts = Long.parseUnsignedLong(hex.substring(0, 16), 16);
        long idx = Long.parseLong(hex.substring(16, 24), 16);
        return new long[] {ts, idx, hex.length() == 26 ? 1 : 0};
    }
}
