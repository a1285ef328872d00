import de.bwaldvogel.mongo.MongoServer;
import de.bwaldvogel.mongo.MongoVersion;
import de.bwaldvogel.mongo.backend.memory.MemoryBackend;

import java.util.Arrays;
import java.util.List;
import java.util.concurrent.CountDownLatch;

/**
 * The MongoDB the MongoDB connector's tests run against on machines without a MongoDB
 * server: mongo-java-server (a real wire-protocol server, in memory; storage, queries,
 * indexes) reporting MongoDB 6.0's wire version (pymongo refuses the default's), presented
 * as the primary of a one-member replica set "rs0" whose change streams, sessions and
 * multi-document transactions behave as MongoDB 6.0's as far as the connector needs
 * ({@link ChangeStreamBackend}, {@link ChangeStreamOplog}; their Javadoc lists what is
 * not emulated: no transaction isolation, no awaitData, resume tokens not in MongoDB's
 * format, history kept in memory from server start).
 *
 * <p>With --stock it serves mongo-java-server's own {@link MemoryBackend} instead (its
 * oplog enabled, the same 6.0 wire version, a standalone server: connect with
 * ?directConnection=true). That is for the canary tests
 * (tests/integration/test_mongo_java_server_faults.py), which pin the stock server's
 * change-stream faults that the layer above exists for, so they fail once a release of
 * mongo-java-server fixes one and that part of the layer can go.
 *
 * <p>Usage: MongoTestServer PORT [HOST [--stock]]. Prints "READY mongodb://HOST:PORT"
 * once listening; runs until killed. Connect with that exact host:port (the replica set's
 * member name) and either ?replicaSet=rs0 or ?directConnection=true.
 */
public final class MongoTestServer {
    private MongoTestServer() {}

    public static void main(String[] args) throws Exception {
        int port = Integer.parseInt(args[0]);
        String host = args.length > 1 ? args[1] : "127.0.0.1";
        boolean stock = args.length > 2 && args[2].equals("--stock");
        if (args.length > 3 || (args.length > 2 && !stock)) {
            throw new IllegalArgumentException("usage: MongoTestServer PORT [HOST [--stock]]");
        }
        MemoryBackend backend = stock ? new MemoryBackend() : new ChangeStreamBackend(host + ":" + port);
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
