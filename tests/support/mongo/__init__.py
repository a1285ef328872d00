"""The MongoDB the connector's tests run against: the project's mongo-java-server build
(jvm/mongo/), or a real deployment named by TIDEMARK_MONGODB_URI."""
