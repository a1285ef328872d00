import de.bwaldvogel.mongo.MongoServer;
import de.bwaldvogel.mongo.MongoVersion;

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
 * <p>Usage: MongoTestServer PORT [HOST]. Prints "READY mongodb://HOST:PORT" once
 * listening; runs until killed. Connect with that exact host:port (the replica set's
 * member name) and either ?replicaSet=rs0 or ?directConnection=true.
 */
public final class MongoTestServer {
    private MongoTestServer() {}

    public static void main(String[] args) throws Exception {
        int port = Integer.parseInt(args[0]);
        String host = args.length > 1 ? args[1] : "127.0.0.1";
        ChangeStreamBackend backend = new ChangeStreamBackend(host + ":" + port);
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
