import java.nio.charset.StandardCharsets;
import java.util.HashSet;
import java.util.Iterator;
import java.util.List;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.TimeUnit;

import org.apache.rocketmq.client.MQAdmin;
import org.apache.rocketmq.client.consumer.DefaultMQPushConsumer;
import org.apache.rocketmq.client.exception.MQClientException;
import org.apache.rocketmq.client.consumer.rebalance.AllocateMessageQueueAveragely;
import org.apache.rocketmq.client.consumer.listener.ConsumeConcurrentlyStatus;
import org.apache.rocketmq.client.consumer.listener.MessageListenerConcurrently;
import org.apache.rocketmq.client.producer.DefaultMQProducer;
import org.apache.rocketmq.client.producer.LocalTransactionState;
import org.apache.rocketmq.client.producer.SendResult;
import org.apache.rocketmq.client.producer.TransactionListener;
import org.apache.rocketmq.client.producer.TransactionMQProducer;
import org.apache.rocketmq.client.producer.TransactionSendResult;
import org.apache.rocketmq.common.consumer.ConsumeFromWhere;
import org.apache.rocketmq.common.message.Message;
import org.apache.rocketmq.client.trace.TraceView;
import org.apache.rocketmq.common.message.MessageExt;
import org.apache.rocketmq.common.topic.TopicValidator;

/**
 * A minimal official-client driver for interop tests (rocketmq-client 4.9.x API).
 *
 * <pre>
 *   produce NAMESRV TOPIC N
 *       sync-sends N messages "body-I" with tag "tag{I%3}" and keys "key-I k{I%2}", one line each:
 *       SEND status msgId broker queueId queueOffset
 *   consume NAMESRV TOPIC GROUP N TIMEOUT_SEC
 *       push consumer (clustering, CONSUME_FROM_FIRST_OFFSET), one line per message:
 *       MSG body tags keys queueId queueOffset msgId   (fields tab-separated)
 *       exits 0 once N distinct msgIds arrived, 3 on timeout
 *   transaction NAMESRV TOPIC N TIMEOUT_SEC
 *       TransactionMQProducer sends N messages "tx-I" (tag "tx", key "key-I"); the local
 *       transaction commits even I, rolls back odd I, except I%4==1: UNKNOW, then committed
 *       when the broker checks. One line per send: SEND status msgId localState I;
 *       exits 0 once every unknown one was checked, 3 on timeout
 * </pre>
 * Only lines starting with "SEND\t" / "MSG\t" / "DONE" are the protocol; anything else is noise.
 * With -Dbolide.trace=true the producer and consumer trace messages (enableMsgTrace) to
 * RMQ_SYS_TRACE_TOPIC, and each waits before it shuts down until the broker serves the traces it
 * sent (Pub, SubAfter) by message id: the Java client sends traces asynchronously and drops the
 * ones still in flight at its shutdown.
 */
public final class BolideClient {
    private static final boolean TRACE = Boolean.getBoolean("bolide.trace");

    private BolideClient() {
    }

    public static void main(String[] args) throws Exception {
        if (args.length < 1) {
            usage();
        }
        switch (args[0]) {
            case "produce":
                if (args.length != 4) {
                    usage();
                }
                produce(args[1], args[2], Integer.parseInt(args[3]));
                break;
            case "consume":
                if (args.length != 6) {
                    usage();
                }
                System.exit(consume(args[1], args[2], args[3], Integer.parseInt(args[4]),
                                    Integer.parseInt(args[5])));
                break;
            case "transaction":
                if (args.length != 5) {
                    usage();
                }
                System.exit(transaction(args[1], args[2], Integer.parseInt(args[3]),
                                        Integer.parseInt(args[4])));
                break;
            default:
                usage();
        }
    }

    private static void usage() {
        System.err.println("usage: produce NAMESRV TOPIC N | consume NAMESRV TOPIC GROUP N TIMEOUT_SEC"
                           + " | transaction NAMESRV TOPIC N TIMEOUT_SEC");
        System.exit(2);
    }

    private static String instance(String role) {
        return "bolide-" + role + "-" + ProcessHandle.current().pid() + "-" + System.nanoTime();
    }

    /**
     * Wait (10 s at most) until no message a listener was handed is still in its process queue:
     * the listener saw the last message before the client removed it, and the offsets the
     * shutdown commits are those of the messages removed.
     */
    private static void awaitProcessed(DefaultMQPushConsumer consumer) throws InterruptedException {
        long deadline = System.currentTimeMillis() + 10_000;
        while (System.currentTimeMillis() < deadline) {
            boolean idle = consumer.getDefaultMQPushConsumerImpl().getRebalanceImpl().getProcessQueueTable()
                .values().stream().allMatch(pq -> pq.getMsgCount().get() == 0);
            if (idle) {
                return;
            }
            Thread.sleep(10);
        }
    }

    /** With TRACE: wait until the broker serves a trace of TYPE for each id (30 s at most). */
    private static void awaitTraces(MQAdmin client, Set<String> ids, String type) throws Exception {
        if (!TRACE) {
            return;
        }
        Set<String> missing = new HashSet<>(ids);
        long deadline = System.currentTimeMillis() + 30_000;
        while (!missing.isEmpty()) {
            for (Iterator<String> it = missing.iterator(); it.hasNext(); ) {
                String id = it.next();
                List<MessageExt> traces;
                try {
                    traces = client.queryMessage(TopicValidator.RMQ_SYS_TRACE_TOPIC, id, 32, 0,
                                                 System.currentTimeMillis() + 60_000).getMessageList();
                } catch (MQClientException notYet) {
                    continue;
                }
                for (MessageExt trace : traces) {
                    if (TraceView.decodeFromTraceTransData(id, trace).stream()
                            .anyMatch(v -> type.equals(v.getMsgType()))) {
                        it.remove();
                        break;
                    }
                }
            }
            if (!missing.isEmpty()) {
                if (System.currentTimeMillis() > deadline) {
                    throw new IllegalStateException("no " + type + " trace of " + missing);
                }
                Thread.sleep(200);
            }
        }
    }

    private static void produce(String namesrv, String topic, int n) throws Exception {
        DefaultMQProducer producer = new DefaultMQProducer("bolide_interop_pg", null, TRACE, null);
        producer.setNamesrvAddr(namesrv);
        producer.setInstanceName(instance("p"));
        producer.setSendMsgTimeout(5000);
        producer.setRetryTimesWhenSendFailed(0);
        producer.setPollNameServerInterval(1000);
        producer.setHeartbeatBrokerInterval(1000);
        producer.setVipChannelEnabled(false);
        producer.start();
        Set<String> sentIds = new HashSet<>();
        try {
            for (int i = 0; i < n; i++) {
                Message msg = new Message(topic, "tag" + (i % 3), "key-" + i + " k" + (i % 2),
                                          ("body-" + i).getBytes(StandardCharsets.UTF_8));
                SendResult r = producer.send(msg);
                sentIds.add(r.getMsgId());
                System.out.println(String.join("\t", "SEND", String.valueOf(r.getSendStatus()), r.getMsgId(),
                        r.getMessageQueue().getBrokerName(), String.valueOf(r.getMessageQueue().getQueueId()),
                        String.valueOf(r.getQueueOffset())));
                System.out.flush();
            }
            awaitTraces(producer, sentIds, "Pub");
        } finally {
            producer.shutdown();
        }
        System.out.println("DONE");
        System.out.flush();
    }

    private static int consume(String namesrv, String topic, String group, int n, int timeoutSec)
            throws Exception {
        Set<String> seen = ConcurrentHashMap.newKeySet();
        CountDownLatch done = new CountDownLatch(1);
        DefaultMQPushConsumer consumer = new DefaultMQPushConsumer(
            group, null, new AllocateMessageQueueAveragely(), TRACE, null);
        consumer.setNamesrvAddr(namesrv);
        consumer.setInstanceName(instance("c"));
        consumer.setConsumeFromWhere(ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET);
        consumer.setPollNameServerInterval(1000);
        consumer.setHeartbeatBrokerInterval(1000);
        consumer.setPersistConsumerOffsetInterval(1000);
        consumer.setVipChannelEnabled(false);
        consumer.subscribe(topic, "*");
        consumer.registerMessageListener((MessageListenerConcurrently) (msgs, ctx) -> {
            for (MessageExt m : msgs) {
                synchronized (System.out) {
                    System.out.println(String.join("\t", "MSG", new String(m.getBody(), StandardCharsets.UTF_8),
                            String.valueOf(m.getTags()), String.valueOf(m.getKeys()),
                            String.valueOf(m.getQueueId()), String.valueOf(m.getQueueOffset()), m.getMsgId()));
                    System.out.flush();
                }
                seen.add(m.getMsgId());
            }
            if (seen.size() >= n) {
                done.countDown();
            }
            return ConsumeConcurrentlyStatus.CONSUME_SUCCESS;
        });
        consumer.start();
        boolean ok;
        try {
            ok = done.await(timeoutSec, TimeUnit.SECONDS);
            if (ok) {
                awaitTraces(consumer, seen, "SubAfter");
                awaitProcessed(consumer);
            }
        } finally {
            consumer.shutdown();
        }
        System.out.println(ok ? "DONE" : "TIMEOUT " + seen.size() + "/" + n);
        System.out.flush();
        return ok ? 0 : 3;
    }

    /** The local transaction outcome of message I, when sent and when the broker checks it. */
    private static LocalTransactionState decide(int i, boolean check) {
        if (i % 4 == 1) {
            return check ? LocalTransactionState.COMMIT_MESSAGE : LocalTransactionState.UNKNOW;
        }
        return i % 2 == 0 ? LocalTransactionState.COMMIT_MESSAGE : LocalTransactionState.ROLLBACK_MESSAGE;
    }

    private static int transaction(String namesrv, String topic, int n, int timeoutSec) throws Exception {
        Set<Integer> unknown = ConcurrentHashMap.newKeySet();
        for (int i = 0; i < n; i++) {
            if (decide(i, false) == LocalTransactionState.UNKNOW) {
                unknown.add(i);
            }
        }
        CountDownLatch checked = new CountDownLatch(unknown.size());
        ExecutorService checkExecutor = Executors.newFixedThreadPool(2);
        TransactionMQProducer producer = new TransactionMQProducer("bolide_interop_tx_pg");
        producer.setNamesrvAddr(namesrv);
        producer.setInstanceName(instance("t"));
        producer.setSendMsgTimeout(5000);
        producer.setRetryTimesWhenSendFailed(0);
        producer.setPollNameServerInterval(1000);
        producer.setHeartbeatBrokerInterval(1000);
        producer.setVipChannelEnabled(false);
        producer.setExecutorService(checkExecutor);  // runs the checks and their END_TRANSACTION
        producer.setTransactionListener(new TransactionListener() {
            @Override
            public LocalTransactionState executeLocalTransaction(Message msg, Object arg) {
                return decide((Integer) arg, false);
            }

            @Override
            public LocalTransactionState checkLocalTransaction(MessageExt msg) {
                int i = Integer.parseInt(new String(msg.getBody(), StandardCharsets.UTF_8).substring(3));
                LocalTransactionState state = decide(i, true);
                synchronized (System.out) {
                    System.out.println(String.join("\t", "CHECK", String.valueOf(i), String.valueOf(state),
                            msg.getTopic(), msg.getMsgId()));
                    System.out.flush();
                }
                if (unknown.remove(i)) {
                    checked.countDown();
                }
                return state;
            }
        });
        producer.start();
        boolean ok;
        try {
            for (int i = 0; i < n; i++) {
                Message msg = new Message(topic, "tx", "key-" + i, ("tx-" + i).getBytes(StandardCharsets.UTF_8));
                TransactionSendResult r = producer.sendMessageInTransaction(msg, i);
                synchronized (System.out) {
                    System.out.println(String.join("\t", "SEND", String.valueOf(r.getSendStatus()), r.getMsgId(),
                            String.valueOf(r.getLocalTransactionState()), String.valueOf(i)));
                    System.out.flush();
                }
            }
            ok = checked.await(timeoutSec, TimeUnit.SECONDS);
        } finally {
            checkExecutor.shutdown();  // lets the running checks send their END_TRANSACTION
            checkExecutor.awaitTermination(10, TimeUnit.SECONDS);
            producer.shutdown();
        }
        System.out.println(ok ? "DONE" : "TIMEOUT " + unknown + " not checked");
        System.out.flush();
        return ok ? 0 : 3;
    }
}
