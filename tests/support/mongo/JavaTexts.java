// How tests/unit/data/mongodb_java_texts.json was written: BSON documents read by the
// MongoDB Java driver as Debezium reads a change's documents (BsonBinaryReader into a
// BsonDocument) and written with Debezium's JsonWriter settings. Not run by the tests
// (the driver is not among the project's jars); to write the file again, or to compare
// the renderers with the driver on other documents:
//
//   git clone --branch r5.6.2 https://github.com/mongodb/mongo-java-driver
//   javac -d bson-classes $(find mongo-java-driver/bson/src/main -name '*.java') <a javax.annotation.Nullable stub>
//   javac -cp bson-classes JavaTexts.java
//   java -cp bson-classes:. JavaTexts < documents
//
// Input: documents, each preceded by its length as a 4-byte little-endian frame. Output:
// three lines per document, "S\t" strict compact (before/after), "R\t" relaxed compact
// (the key's id), "D\t" relaxed default (updatedFields); "E\t" and the driver's error
// when it cannot read the document.

import java.io.FileDescriptor;
import java.io.FileOutputStream;
import java.io.PrintStream;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;

import org.bson.BsonBinaryReader;
import org.bson.BsonDocument;
import org.bson.codecs.BsonDocumentCodec;
import org.bson.codecs.DecoderContext;
import org.bson.json.JsonMode;
import org.bson.json.JsonWriterSettings;

public class JavaTexts {
    static final JsonWriterSettings STRICT = JsonWriterSettings.builder()
            .outputMode(JsonMode.STRICT).indent(true).indentCharacters("").newLineCharacters("").build();
    static final JsonWriterSettings RELAXED = JsonWriterSettings.builder()
            .outputMode(JsonMode.RELAXED).indent(true).indentCharacters("").newLineCharacters("").build();
    static final JsonWriterSettings DEFAULT = JsonWriterSettings.builder().outputMode(JsonMode.RELAXED).build();

    public static void main(String[] args) throws Exception {
        byte[] all = System.in.readAllBytes();
        ByteBuffer frames = ByteBuffer.wrap(all).order(ByteOrder.LITTLE_ENDIAN);
        PrintStream out = new PrintStream(new FileOutputStream(FileDescriptor.out), true, "UTF-8");
        int at = 0;
        while (at < all.length) {
            int length = frames.getInt(at);
            at += 4;
            byte[] one = java.util.Arrays.copyOfRange(all, at, at + length);
            at += length;
            try {
                BsonDocument doc = new BsonDocumentCodec().decode(
                        new BsonBinaryReader(ByteBuffer.wrap(one)), DecoderContext.builder().build());
                out.println("S\t" + doc.toJson(STRICT));
                out.println("R\t" + doc.toJson(RELAXED));
                out.println("D\t" + doc.toJson(DEFAULT));
            } catch (RuntimeException e) {
                String message = String.valueOf(e.getMessage()).replace("\n", " ");
                out.println("E\t" + e.getClass().getSimpleName() + ": " + message);
                out.println("E\t-");
                out.println("E\t-");
            }
        }
    }
}
