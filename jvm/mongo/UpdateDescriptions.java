import de.bwaldvogel.mongo.bson.Document;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.Iterator;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Objects;

/**
 * The updateDescription of an update event, derived from the update spec and the
 * document before and after it (MongoDB derives it from its oplog entry's diff, which the
 * base server does not produce). Each path the spec sets is reported with its new value:
 * positional paths such as {@code a.$.b} as the whole array {@code a}; appends by
 * $push/$addToSet as {@code arr.N} keys, as MongoDB 5.0+ does; a path whose parent did not
 * exist as the topmost new field. truncatedArrays is always empty.
 */
final class UpdateDescriptions {

    /** What {@link #getPath} returns for a path that is absent (null is a value). */
    private static final Object MISSING = new Object();

    private UpdateDescriptions() {}

    /** Whether an update spec uses operators ($set, ...): an "update" event, else a "replace". */
    static boolean isOperatorUpdate(Object updateSpec) {
        if (!(updateSpec instanceof Document) || ((Document) updateSpec).isEmpty()) {
            return false;
        }
        for (String key : ((Document) updateSpec).keySet()) {
            if (key.startsWith("$")) {
                return true;
            }
        }
        return false;
    }

    /** The value at a dotted path (numeric parts index arrays), or {@link #MISSING}. */
    static Object getPath(Object document, String path) {
        Object current = document;
        for (String part : path.split("\\.", -1)) {
            if (current instanceof Document) {
                Document d = (Document) current;
                if (!d.containsKey(part)) {
                    return MISSING;
                }
                current = d.get(part);
            } else if (current instanceof List<?>) {
                List<?> list = (List<?>) current;
                if (part.isEmpty() || !part.chars().allMatch(Character::isDigit) || part.length() > 9) {
                    return MISSING;
                }
                int index = Integer.parseInt(part);
                if (index >= list.size()) {
                    return MISSING;
                }
                current = list.get(index);
            } else {
                return MISSING;
            }
        }
        return current;
    }

    /** "a.$.b", "a.$[].b", "a.$[x].b" → "a" (the array as a whole). */
    private static String cutPositional(String path) {
        String[] parts = path.split("\\.", -1);
        for (int i = 0; i < parts.length; i++) {
            if (parts[i].equals("$") || parts[i].startsWith("$[")) {
                return i == 0 ? path : String.join(".", Arrays.copyOfRange(parts, 0, i));
            }
        }
        return path;
    }

    /** The shortest prefix of {@code path} that the old document did not have. */
    private static String topmostCreated(Document before, String path) {
        if (before == null) {
            return path;
        }
        String[] parts = path.split("\\.", -1);
        StringBuilder prefix = new StringBuilder();
        for (int i = 0; i < parts.length - 1; i++) {
            if (i > 0) {
                prefix.append('.');
            }
            prefix.append(parts[i]);
            if (getPath(before, prefix.toString()) == MISSING) {
                return prefix.toString();
            }
        }
        return path;
    }

    /** {updatedFields, removedFields, truncatedArrays} of the update {@code spec}. */
    static Document describeUpdate(Document spec, Document before, Document after) {
        Map<String, Object> updated = new LinkedHashMap<>();
        List<String> removed = new ArrayList<>();
        for (Map.Entry<String, Object> entry : spec.entrySet()) {
            String operator = entry.getKey();
            if (!(entry.getValue() instanceof Document)) {
                continue;
            }
            Document arguments = (Document) entry.getValue();
            for (Map.Entry<String, Object> argument : arguments.entrySet()) {
                String path = argument.getKey();
                switch (operator) {
                    case "$setOnInsert" -> {
                    }
                    case "$unset" -> unsetPath(cutPositional(path), before, after, updated, removed);
                    case "$rename" -> {
                        unsetPath(path, before, after, updated, removed);
                        if (argument.getValue() instanceof String) {
                            setPath((String) argument.getValue(), before, after, updated);
                        }
                    }
                    case "$push", "$addToSet" -> appendPath(path, before, after, updated);
                    default -> setPath(path, before, after, updated);
                }
            }
        }
        if (updated.isEmpty() && removed.isEmpty() && before != null) {
            // a change the spec does not explain (should not happen): top-level differences
            for (Map.Entry<String, Object> field : after.entrySet()) {
                if (!Objects.equals(before.getOrDefault(field.getKey(), MISSING), field.getValue())) {
                    updated.put(field.getKey(), field.getValue());
                }
            }
            for (String key : before.keySet()) {
                if (!after.containsKey(key)) {
                    removed.add(key);
                }
            }
        }
        // a path inside another reported one is covered by it
        for (Iterator<String> it = updated.keySet().iterator(); it.hasNext(); ) {
            String path = it.next();
            for (String other : updated.keySet()) {
                if (path.startsWith(other + ".")) {
                    it.remove();
                    break;
                }
            }
        }
        Document updatedFields = new Document();
        updatedFields.putAll(updated);
        return new Document("updatedFields", updatedFields)
            .append("removedFields", removed)
            .append("truncatedArrays", new ArrayList<>());
    }

    private static void setPath(String path, Document before, Document after, Map<String, Object> updated) {
        String effective = topmostCreated(before, cutPositional(path));
        Object now = getPath(after, effective);
        if (now == MISSING) {
            return;
        }
        Object old = before == null ? MISSING : getPath(before, effective);
        if (!Objects.equals(old, now)) {
            updated.put(effective, now);
        }
    }

    private static void appendPath(String path, Document before, Document after, Map<String, Object> updated) {
        String cut = cutPositional(path);
        if (!cut.equals(path) || before == null) {
            setPath(path, before, after, updated);
            return;
        }
        Object old = getPath(before, path);
        Object now = getPath(after, path);
        if (old instanceof List<?> && now instanceof List<?>) {
            List<?> oldList = (List<?>) old;
            List<?> newList = (List<?>) now;
            if (newList.size() >= oldList.size() && newList.subList(0, oldList.size()).equals(oldList)) {
                for (int i = oldList.size(); i < newList.size(); i++) {
                    updated.put(path + "." + i, newList.get(i));
                }
                return;
            }
        }
        setPath(path, before, after, updated);
    }

    private static void unsetPath(String path, Document before, Document after, Map<String, Object> updated,
                                  List<String> removed) {
        if (before == null || getPath(before, path) == MISSING) {
            return;
        }
        Object now = getPath(after, path);
        if (now == MISSING) {
            if (!removed.contains(path)) {
                removed.add(path);
            }
        } else if (!Objects.equals(getPath(before, path), now)) {
            updated.put(path, now); // $unset of an array element sets it to null
        }
    }
}
