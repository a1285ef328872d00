import de.bwaldvogel.mongo.MongoServer;
import de.bwaldvogel.mongo.MongoVersion;
import de.bwaldvogel.mongo.backend.memory.MemoryBackend;

import java.util.Arrays;
import java.util.List;
import java.util.concurrent.CountDownLatch;

/**
 * The MongoDB the MongoDB connector's tests run against on machines without a MongoDB
 * server: mongo-java-server (a real wire-protocol server, in memory) with its oplog on,
 * so change streams work, reporting MongoDB 6.0's wire version (pymongo refuses the
 * default's). Usage: MongoTestServer PORT [HOST]. Prints "READY <uri>" once listening;
 * runs until killed.
 */
public final class MongoTestServer {
    private MongoTestServer() {}

    public static void main(String[] args) throws Exception {
        int port = Integer.parseInt(args[0]);
        String host = args.length > 1 ? args[1] : "127.0.0.1";
        MemoryBackend backend = new MemoryBackend();
        backend.version(new MongoVersion() {
            @Override
            public List<Integer> getVersionArray() {
                return Arrays.asList(6, 0, 0);
            }

            @Override
            public int getWireVersion() {
                return 17;
            }
        });
        MongoServer server = new MongoServer(backend);
        server.enableOplog();
        server.bind(host, port);
        Runtime.getRuntime().addShutdownHook(new Thread(server::shutdownNow));
        System.out.println("READY mongodb://" + host + ":" + port);
        System.out.flush();
        new CountDownLatch(1).await();
    }
}
