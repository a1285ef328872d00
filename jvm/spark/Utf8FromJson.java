package dev.tidemark.spark;

import com.fasterxml.jackson.core.JsonFactory;
import com.fasterxml.jackson.core.JsonParser;
import java.io.ByteArrayInputStream;
import java.io.IOException;
import java.io.Serializable;
import java.io.UncheckedIOException;
import java.util.List;
import java.util.Objects;
import org.apache.spark.sql.Column;
import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.catalyst.expressions.Expression;
import org.apache.spark.sql.catalyst.expressions.Literal;
import org.apache.spark.sql.catalyst.expressions.objects.Invoke;
import org.apache.spark.sql.catalyst.json.JSONOptions;
import org.apache.spark.sql.catalyst.json.JacksonParser;
import org.apache.spark.sql.catalyst.util.FailureSafeParser;
import org.apache.spark.sql.classic.ExpressionUtils;
import org.apache.spark.sql.sources.Filter;
import org.apache.spark.sql.types.AbstractDataType;
import org.apache.spark.sql.types.DataType;
import org.apache.spark.sql.types.ObjectType;
import org.apache.spark.sql.types.StringType$;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.unsafe.Platform;
import org.apache.spark.unsafe.types.UTF8String;
import scala.collection.Iterator;
import scala.jdk.javaapi.CollectionConverters;

/**
 * Spark's {@code from_json} of a string column into a struct, read from the string's UTF-8
 * bytes. Spark's own wraps every record in an {@code InputStreamReader} with a fresh 8 KB
 * buffer and has Jackson decode characters; here Jackson reads the bytes themselves. The
 * rest is Spark's: its {@link JacksonParser} converts the tokens to the schema's types and
 * its {@link FailureSafeParser} handles a malformed record as {@code from_json} without
 * options does (PERMISSIVE: the fields read before the error, the others null). One
 * difference: bytes that are not UTF-8 make the record malformed, where Spark's reader
 * would put U+FFFD in their place.
 *
 * <p>Evaluated by an {@link Invoke} on this object, as Spark 4 evaluates its own
 * {@code from_json}, so it takes part in whole-stage code generation.
 */
public final class Utf8FromJson implements Serializable {

    private static final long serialVersionUID = 1L;

    private final StructType schema;
    private final String timeZone;
    private final String corruptRecordColumn;
    private transient FailureSafeParser<UTF8String> parser;

    private Utf8FromJson(StructType schema, String timeZone, String corruptRecordColumn) {
        this.schema = schema;
        this.timeZone = timeZone;
        this.corruptRecordColumn = corruptRecordColumn;
    }

    /**
     * {@code from_json(json, schema)} read from bytes; {@code schemaJson} is the struct's
     * JSON form ({@code StructType.json()}), {@code timeZone} and
     * {@code corruptRecordColumn} the session's {@code spark.sql.session.timeZone} and
     * {@code spark.sql.columnNameOfCorruptRecord}, which {@code from_json} takes from it.
     */
    public static Column column(Column json, String schemaJson, String timeZone, String corruptRecordColumn) {
        StructType schema = ((StructType) DataType.fromJson(schemaJson)).asNullable();
        Utf8FromJson reader = new Utf8FromJson(schema, timeZone, corruptRecordColumn);
        Expression child = ExpressionUtils.expression(json);
        Expression invoke = new Invoke(
                Literal.create(reader, new ObjectType(Utf8FromJson.class)),
                "evaluate",
                schema,
                CollectionConverters.asScala(List.of(child)).toList(),
                CollectionConverters.asScala(List.<AbstractDataType>of(StringType$.MODULE$)).toList(),
                true,
                true,
                true);
        return ExpressionUtils.column(invoke);
    }

    /** The record's row; null for a null record. */
    public InternalRow evaluate(UTF8String json) {
        if (json == null) {
            return null;
        }
        if (parser == null) {
            parser = newParser();
        }
        Iterator<InternalRow> rows = parser.parse(json);
        return rows.hasNext() ? rows.next() : null;
    }

    private FailureSafeParser<UTF8String> newParser() {
        JSONOptions options = new JSONOptions(
                scala.collection.immutable.Map$.MODULE$.<String, String>empty(), timeZone, corruptRecordColumn);
        JacksonParser rows = new JacksonParser(
                schema, options, false, CollectionConverters.asScala(List.<Filter>of()).toList());
        scala.Function2<JsonFactory, UTF8String, JsonParser> open = Utf8FromJson::open;
        scala.Function1<UTF8String, UTF8String> text = record -> record;
        return new FailureSafeParser<>(
                record -> rows.parse(record, open, text),
                options.parseMode(),
                schema,
                options.columnNameOfCorruptRecord());
    }

    /**
     * A Jackson parser reading the string's bytes where they lie (a copy when off-heap).
     * Through a stream, not the array: for a STRING field holding an object or array,
     * Spark's parser copies the text out of an array source by the parser's byte offsets,
     * which are relative to the record, not to the array (and differ from the text
     * {@code from_json} gives, which it writes again from the tokens).
     */
    private static JsonParser open(JsonFactory factory, UTF8String record) {
        try {
            if (record.getBaseObject() instanceof byte[] bytes) {
                int offset = (int) (record.getBaseOffset() - Platform.BYTE_ARRAY_OFFSET);
                return factory.createParser(new ByteArrayInputStream(bytes, offset, record.numBytes()));
            }
            return factory.createParser(new ByteArrayInputStream(record.getBytes()));
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
    }

    @Override
    public boolean equals(Object other) {
        return other instanceof Utf8FromJson that
                && schema.equals(that.schema)
                && Objects.equals(timeZone, that.timeZone)
                && Objects.equals(corruptRecordColumn, that.corruptRecordColumn);
    }

    @Override
    public int hashCode() {
        return Objects.hash(schema, timeZone, corruptRecordColumn);
    }

    @Override
    public String toString() {
        return "utf8_from_json(" + schema.simpleString() + ")";
    }
}
