package org.caffeine.hbase;

import java.io.IOException;
import java.io.PrintWriter;
import java.io.StringWriter;
import java.lang.reflect.InvocationTargetException;
import java.lang.reflect.Proxy;
import java.net.InetSocketAddress;
import java.nio.ByteBuffer;

import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.hbase.CoprocessorEnvironment;
import org.apache.hadoop.hbase.TableName;
import org.apache.hadoop.hbase.client.Connection;
import org.apache.hadoop.hbase.client.RetriesExhaustedException;
import org.apache.hadoop.hbase.client.Table;
import org.apache.hadoop.hbase.coprocessor.RegionServerCoprocessor;
import org.apache.hadoop.hbase.coprocessor.RegionServerCoprocessorEnvironment;
import org.apache.hadoop.hbase.security.UserProvider;
import org.apache.hadoop.hbase.thrift2.ThriftHBaseServiceHandler;
import org.apache.hadoop.hbase.thrift2.generated.THBaseService;
import org.apache.hadoop.hbase.thrift2.generated.TIOError;
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
 *
 * <p>Errors read as the standalone server's do ({@link #asOverRpc}): there, a region server's
 * exception reaches the handler through an RPC, whose message is the exception as the region
 * server printed it (its class, message and stack trace); here it arrives as thrown, so that
 * text is made for it.
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
    THBaseService.Iface handler = asOverRpc(new ShortCircuitHandler(conf, connection));
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

  /**
   * {@code handler}, whose errors carry the text an RPC would have given them: a
   * {@link TIOError} whose cause's message does not start with the cause's class name gets
   * the cause's stack trace as printed (class, message, frames), as {@code RemoteException}
   * carries it. The client's own summary of a batch
   * ({@link RetriesExhaustedException}, whose per-action errors came through the region
   * server's multi response as printed text either way) is left as it is.
   */
  static THBaseService.Iface asOverRpc(THBaseService.Iface handler) {
    return (THBaseService.Iface) Proxy.newProxyInstance(THBaseService.Iface.class.getClassLoader(),
        new Class<?>[] {THBaseService.Iface.class}, (proxy, method, args) -> {
          try {
            return method.invoke(handler, args);
          } catch (InvocationTargetException e) {
            Throwable thrown = e.getCause();
            if (thrown instanceof TIOError) {
              Throwable cause = thrown.getCause();
              String message = cause == null ? null : cause.getMessage();
              if (cause != null && !(cause instanceof RetriesExhaustedException)
                  && (message == null || !message.startsWith(cause.getClass().getName()))) {
                StringWriter text = new StringWriter();
                cause.printStackTrace(new PrintWriter(text));
                ((TIOError) thrown).setMessage(text.toString());
              }
            }
            throw thrown;
          }
        });
  }

  @Override
  public void stop(CoprocessorEnvironment env) {
    if (server != null) {
      server.stop();
    }
  }
}
