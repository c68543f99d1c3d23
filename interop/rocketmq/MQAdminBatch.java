import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.lang.reflect.Field;
import java.lang.reflect.Modifier;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;

import org.apache.rocketmq.tools.admin.DefaultMQAdminExt;
import org.apache.rocketmq.tools.command.MQAdminStartup;

/**
 * Runs several mqadmin sub-commands in one JVM, so a test does not pay a JVM start (and the
 * client's netty shutdown grace period) for every command. Each line of standard input is one
 * command, its arguments separated by tabs. After each command a line {@value #END} followed by
 * the command's number is printed on standard output. Compiled against (and run with) the
 * classpath of each RocketMQ version, 4.9.x or 5.x.
 *
 * <p>A 5.x client's shutdown waits for its NettyEventExecutor thread, which sleeps in a poll of
 * up to 3 s without being woken: while the main thread is in that shutdown, a watcher interrupts
 * the thread (it then sees it was stopped and ends), which saves up to 3 s per command.
 *
 * <p>One extra command, {@code @waitBroker <namesrv> <brokerAddr> <timeoutMs>}, waits until the
 * NameServer lists the broker (a 5.x broker may print its boot line before its first
 * registration reaches the NameServer) and prints {@code registered} or {@code NOT REGISTERED}.
 */
public final class MQAdminBatch {
    static final String END = "=== mqadmin-batch end ";

    public static void main(String[] args) throws Exception {
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        List<String[]> commands = new ArrayList<>();
        for (String line; (line = in.readLine()) != null; ) {
            if (!line.isEmpty()) {
                commands.add(line.split("\t", -1));
            }
        }
        unblockShutdowns(Thread.currentThread());
        int n = 0;
        for (String[] command : commands) {
            try {
                if (command[0].equals("@waitBroker")) {
                    waitBroker(command[1], command[2], Long.parseLong(command[3]));
                } else {
                    freshSubCommands();
                    MQAdminStartup.main0(command, null);
                }
            } catch (Throwable t) {
                t.printStackTrace(System.out);
            }
            System.out.println();
            System.out.println(END + n++);
            System.out.flush();
        }
        System.exit(0);  // skip the clients' netty shutdown grace period
    }

    private static void waitBroker(String namesrv, String brokerAddr, long timeoutMs) throws Exception {
        DefaultMQAdminExt admin = new DefaultMQAdminExt(5000);
        admin.setNamesrvAddr(namesrv);
        admin.setInstanceName("mqadmin-batch-wait-" + System.nanoTime());
        admin.start();
        try {
            long start = System.currentTimeMillis();
            long deadline = start + timeoutMs;
            Exception last = null;
            while (System.currentTimeMillis() < deadline) {
                try {
                    var info = admin.examineBrokerClusterInfo();
                    for (var data : info.getBrokerAddrTable().values()) {
                        if (data.getBrokerAddrs().containsValue(brokerAddr)) {
                            System.out.println("registered " + brokerAddr + " after "
                                + (System.currentTimeMillis() - start) + " ms");
                            return;
                        }
                    }
                } catch (Exception e) {
                    last = e;
                }
                Thread.sleep(100);  // no event to wait on: the NameServer is only polled
            }
            System.out.println("NOT REGISTERED " + brokerAddr + " within " + timeoutMs + " ms: " + last);
        } finally {
            admin.shutdown();
        }
    }

    /** Interrupt the NettyEventExecutor threads while {@code main} waits in a client shutdown. */
    private static void unblockShutdowns(Thread main) {
        Thread watcher = new Thread(() -> {
            while (true) {
                for (StackTraceElement frame : main.getStackTrace()) {
                    if (frame.getMethodName().equals("shutdown")
                        && frame.getClassName().endsWith("NettyRemotingClient")) {
                        for (Thread t : Thread.getAllStackTraces().keySet()) {
                            if (t.getName().startsWith("NettyEventExecutor")) {
                                t.interrupt();
                            }
                        }
                        break;
                    }
                }
                try {
                    Thread.sleep(20);
                } catch (InterruptedException e) {
                    return;
                }
            }
        }, "mqadmin-batch-unblock");
        watcher.setDaemon(true);
        watcher.start();
    }

    /**
     * main0 registers its sub-command objects in a static list on every call and runs the first
     * match; some keep a client that cannot be started again, so empty the list before each run.
     */
    private static void freshSubCommands() throws IllegalAccessException {
        for (Field f : MQAdminStartup.class.getDeclaredFields()) {
            if (Modifier.isStatic(f.getModifiers()) && List.class.isAssignableFrom(f.getType())) {
                f.setAccessible(true);
                ((List<?>) f.get(null)).clear();
            }
        }
    }
}
