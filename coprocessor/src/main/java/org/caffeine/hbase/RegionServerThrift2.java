package org.caffeine.hbase;

import java.io.IOException;
import java.net.InetSocketAddress;
import java.nio.ByteBuffer;

import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.hbase.CoprocessorEnvironment;
import org.apache.hadoop.hbase.TableName;
import org.apache.hadoop.hbase.client.Connection;
import org.apache.hadoop.hbase.client.Table;
import org.apache.hadoop.hbase.coprocessor.RegionServerCoprocessor;
import org.apache.hadoop.hbase.coprocessor.RegionServerCoprocessorEnvironment;
import org.apache.hadoop.hbase.security.UserProvider;
import org.apache.hadoop.hbase.thrift2.ThriftHBaseServiceHandler;
import org.apache.hadoop.hbase.thrift2.generated.THBaseService;
import org.apache.thrift.protocol.TBinaryProtocol;
import org.apache.thrift.server.TServer;
import org.apache.thrift.server.TThreadPoolServer;
import org.apache.thrift.transport.TServerSocket;
import org.apache.thrift.transport.TTransportFactory;

/**
 * A Thrift2 server inside the region server: HBase's own Thrift2 handler, whose tables come
 * from the region server's short-circuit connection, so a call on rows this server holds
 * reaches its regions without an RPC (no netty, no protobuf bytes, no second JVM).
 * Started when {@code caffeine.regionserver.thrift2.port} is set; binds
 * {@code caffeine.regionserver.thrift2.host} (127.0.0.1), buffered transport and binary
 * protocol, as the standalone server's {@code -threadpool}.
 */
public class RegionServerThrift2 implements RegionServerCoprocessor {
  public static final String PORT = "caffeine.regionserver.thrift2.port";
  public static final String HOST = "caffeine.regionserver.thrift2.host";

  private TServer server;

  static final class ShortCircuitHandler extends ThriftHBaseServiceHandler {
    private final Connection connection;

    ShortCircuitHandler(Configuration conf, Connection connection) throws IOException {
      super(conf, UserProvider.instantiate(conf));
      this.connection = connection;
    }

    @Override
    protected Table getTable(ByteBuffer tableName) {
      try {
        byte[] name = new byte[tableName.remaining()];
        tableName.duplicate().get(name);
        return connection.getTable(TableName.valueOf(name));
      } catch (IOException e) {
        throw new RuntimeException(e);
      }
    }
  }

  @Override
  public void start(CoprocessorEnvironment env) throws IOException {
    Configuration conf = env.getConfiguration();
    int port = conf.getInt(PORT, 0);
    if (port <= 0 || !(env instanceof RegionServerCoprocessorEnvironment)) {
      return;
    }
    Connection connection = ((RegionServerCoprocessorEnvironment) env).getConnection();
    ShortCircuitHandler handler = new ShortCircuitHandler(conf, connection);
    try {
      TServerSocket socket = new TServerSocket(new InetSocketAddress(conf.get(HOST, "127.0.0.1"), port));
      TThreadPoolServer.Args args = new TThreadPoolServer.Args(socket)
          .processor(new THBaseService.Processor<>(handler))
          .protocolFactory(new TBinaryProtocol.Factory())
          .transportFactory(new TTransportFactory())
          .minWorkerThreads(16).maxWorkerThreads(1000);
      server = new TThreadPoolServer(args);
    } catch (Exception e) {
      throw new IOException("cannot start the region server's Thrift2 server on port " + port, e);
    }
    Thread serving = new Thread(server::serve, "caffeine-rs-thrift2");
    serving.setDaemon(true);
    serving.start();
  }

  @Override
  public void stop(CoprocessorEnvironment env) {
    if (server != null) {
      server.stop();
    }
  }
}
