import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import java.util.Set;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.function.Function;

import org.apache.rocketmq.acl.common.AclClientRPCHook;
import org.apache.rocketmq.acl.common.SessionCredentials;
import org.apache.rocketmq.client.consumer.DefaultLitePullConsumer;
import org.apache.rocketmq.client.consumer.DefaultMQPushConsumer;
import org.apache.rocketmq.client.consumer.MessageSelector;
import org.apache.rocketmq.client.consumer.listener.ConsumeConcurrentlyStatus;
import org.apache.rocketmq.client.consumer.listener.ConsumeOrderlyStatus;
import org.apache.rocketmq.client.consumer.listener.MessageListenerConcurrently;
import org.apache.rocketmq.client.consumer.listener.MessageListenerOrderly;
import org.apache.rocketmq.client.exception.MQClientException;
import org.apache.rocketmq.client.producer.DefaultMQProducer;
import org.apache.rocketmq.client.producer.RequestCallback;
import org.apache.rocketmq.client.producer.SendCallback;
import org.apache.rocketmq.client.producer.SendResult;
import org.apache.rocketmq.client.utils.MessageUtil;
import org.apache.rocketmq.common.consumer.ConsumeFromWhere;
import org.apache.rocketmq.common.message.Message;
import org.apache.rocketmq.common.message.MessageAccessor;
import org.apache.rocketmq.common.message.MessageExt;
import org.apache.rocketmq.common.message.MessageQueue;
import org.apache.rocketmq.remoting.RPCHook;

/**
 * Client scenarios beyond the plain round trip, for interop tests (rocketmq-client 4.9.x API).
 * Every command prints tab-separated protocol lines and ends with "DONE" (exit 0), or prints
 * "TIMEOUT ..." and exits 3.
 *
 * <pre>
 *   send-modes NAMESRV TOPIC N     N sync, N async, N oneway sends and one batch of N:
 *                                  SEND mode status msgId queueId queueOffset (oneway: no result)
 *   retry NAMESRV TOPIC GROUP N MAX TIMEOUT
 *                                  push consumer with maxReconsumeTimes MAX that fails even bodies
 *                                  once and odd bodies always: MSG body reconsumeTimes topic msgId;
 *                                  then reads %DLQ%GROUP: DLQ body reconsumeTimes topic RETRY_TOPIC
 *   orderly NAMESRV TOPIC GROUP N KEYS TIMEOUT
 *                                  sends N messages "K:I" hashed to a queue by key K (KEYS keys),
 *                                  then an orderly consumer prints MSG body queueId queueOffset
 *   group NAMESRV TOPIC GROUP MODEL N TIMEOUT
 *                                  two push consumers (instances a and b) in one group, MODEL
 *                                  CLUSTERING or BROADCASTING; once the rebalance has split
 *                                  (or, broadcasting, given each) the queues: ASSIGNED na nb,
 *                                  then N messages are sent: MSG instance body msgId
 *   lite-pull NAMESRV TOPIC GROUP N TIMEOUT
 *                                  subscribing lite pull consumer: MSG body queueId queueOffset
 *   query NAMESRV TOPIC KEY OFFSET_MSG_ID
 *                                  queryMessage by key, then viewMessage by offset id:
 *                                  FOUND body msgId / VIEW body topic
 *   sql NAMESRV TOPIC GROUP N EXPECT EXPRESSION TIMEOUT
 *                                  sends N messages with the user property n=i and tag even or
 *                                  odd, then a push consumer subscribed by
 *                                  MessageSelector.bySql(EXPRESSION) prints MSG body n tags until
 *                                  EXPECT arrived; REFUSED reason when its start is refused
 *   acl NAMESRV TOPIC GROUP N ACCESS_KEY SECRET_KEY TIMEOUT
 *                                  with AclClientRPCHook(ACCESS_KEY, SECRET_KEY): N sync sends
 *                                  and a batch of 2 (SEND mode status ...), a push consumer
 *                                  printing MSG body until all N + 2 arrived; then one send
 *                                  with a wrong secret and one unsigned: REFUSED mode reason
 *   request NAMESRV TOPIC N TIMEOUT_MS
 *                                  N DefaultMQProducer.request calls one after the other, each
 *                                  waiting up to TIMEOUT_MS: REPLY body topic correlationId
 *                                  (the RequestCallback form: the blocking one of 5.3.x returns
 *                                  as soon as the request is sent, apache/rocketmq#9319, and
 *                                  both call onSuccess(null) then, before the reply)
 *   respond NAMESRV TOPIC GROUP N TIMEOUT
 *                                  a push consumer answering each request with
 *                                  MessageUtil.createReplyMessage(msg, "re:" + body) until N
 *                                  were answered: ANSWERED body sendStatus
 *   timer NAMESRV TOPIC GROUP N DELAY_MS TIMEOUT
 *                                  N sends of "timer-I" to be delivered DELAY_MS later, and one
 *                                  of "timer-recalled" recalled at once (the TIMER_DELIVER_MS
 *                                  property Message.setDeliverTimeMs of 5.x sets): DUE body
 *                                  deliverTimeMs, RECALLED msgId; then a push consumer prints
 *                                  MSG body receivedAtMs until all N arrived
 *   compressed NAMESRV TOPIC N SIZE
 *                                  N messages of SIZE bytes "TYPE-I:rocketmq-body-rocketmq-..."
 *                                  compressed with each of ZLIB, LZ4 and ZSTD (5.x
 *                                  setCompressType): SEND type status
 *   pop NAMESRV TOPIC GROUP N TIMEOUT
 *                                  a 5.x push consumer letting the broker allocate its queues
 *                                  (setClientRebalance(false): with the group's mode POP it pops
 *                                  them), then N sends of "pop-I": MSG body reconsumeTimes hasPopCk,
 *                                  until all N were consumed
 *   compacted NAMESRV TOPIC GROUP KEYS ROUNDS TIMEOUT
 *                                  RocketMQ's docs/en/Example_Compaction_Topic.md: ROUNDS rounds of
 *                                  one send per key "key-K" (body "vK-R", a selector by key picks
 *                                  the queue): SEND key queueId queueOffset; then SENT, and waits
 *                                  for a line on stdin (the test compacts); then a lite pull
 *                                  consumer assigned every queue, seekToBegin on each, polls into
 *                                  a key -> body map: MSG key body queueId queueOffset, until
 *                                  every key holds its round ROUNDS-1 value; then KV key body
 *   digests NAMESRV TOPIC GROUP N TIMEOUT
 *                                  a push consumer printing MSG head length md5 (head: the body
 *                                  up to its first ':') until N distinct bodies arrived
 * </pre>
 */
public final class BolideScenarios {
    private BolideScenarios() {
    }

    public static void main(String[] a) throws Exception {
        if (a.length < 1) {
            usage();
        }
        int code;
        switch (a[0]) {
            case "send-modes":
                code = sendModes(a[1], a[2], Integer.parseInt(a[3]));
                break;
            case "retry":
                code = retry(a[1], a[2], a[3], Integer.parseInt(a[4]), Integer.parseInt(a[5]),
                             Integer.parseInt(a[6]));
                break;
            case "orderly":
                code = orderly(a[1], a[2], a[3], Integer.parseInt(a[4]), Integer.parseInt(a[5]),
                               Integer.parseInt(a[6]));
                break;
            case "group":
                code = group(a[1], a[2], a[3], a[4], Integer.parseInt(a[5]),
                             Integer.parseInt(a[6]));
                break;
            case "lite-pull":
                code = litePull(a[1], a[2], a[3], Integer.parseInt(a[4]), Integer.parseInt(a[5]));
                break;
            case "query":
                code = query(a[1], a[2], a[3], a[4]);
                break;
            case "sql":
                code = sql(a[1], a[2], a[3], Integer.parseInt(a[4]), Integer.parseInt(a[5]), a[6],
                           Integer.parseInt(a[7]));
                break;
            case "acl":
                code = acl(a[1], a[2], a[3], Integer.parseInt(a[4]), a[5], a[6], Integer.parseInt(a[7]));
                break;
            case "request":
                code = request(a[1], a[2], Integer.parseInt(a[3]), Long.parseLong(a[4]));
                break;
            case "respond":
                code = respond(a[1], a[2], a[3], Integer.parseInt(a[4]), Integer.parseInt(a[5]));
                break;
            case "compressed":
                code = compressed(a[1], a[2], Integer.parseInt(a[3]), Integer.parseInt(a[4]));
                break;
            case "compacted":
                code = compacted(a[1], a[2], a[3], Integer.parseInt(a[4]), Integer.parseInt(a[5]),
                                 Integer.parseInt(a[6]));
                break;
            case "digests":
                code = digests(a[1], a[2], a[3], Integer.parseInt(a[4]), Integer.parseInt(a[5]));
                break;
            case "pop":
                code = pop(a[1], a[2], a[3], Integer.parseInt(a[4]), Integer.parseInt(a[5]));
                break;
            case "timer":
                code = timer(a[1], a[2], a[3], Integer.parseInt(a[4]), Long.parseLong(a[5]),
                             Integer.parseInt(a[6]));
                break;
            default:
                usage();
                return;
        }
        System.out.println(code == 0 ? "DONE" : "TIMEOUT");
        System.out.flush();
        System.exit(code);
    }

    private static void usage() {
        System.err.println("usage: see the class comment of BolideScenarios.java");
        System.exit(2);
    }

    private static void line(String... fields) {
        synchronized (System.out) {
            System.out.println(String.join("\t", fields));
            System.out.flush();
        }
    }

    private static String instance(String role) {
        return "bolide-" + role + "-" + ProcessHandle.current().pid() + "-" + System.nanoTime();
    }

    private static byte[] utf8(String s) {
        return s.getBytes(StandardCharsets.UTF_8);
    }

    private static String text(MessageExt m) {
        return new String(m.getBody(), StandardCharsets.UTF_8);
    }

    private static DefaultMQProducer producer(String namesrv) throws Exception {
        return producer(namesrv, null);
    }

    private static DefaultMQProducer producer(String namesrv, RPCHook hook) throws Exception {
        DefaultMQProducer producer = new DefaultMQProducer("bolide_scenarios_pg", hook);
        producer.setNamesrvAddr(namesrv);
        producer.setInstanceName(instance("p"));
        producer.setSendMsgTimeout(5000);
        producer.setVipChannelEnabled(false);
        producer.start();
        return producer;
    }

    private static DefaultMQPushConsumer pushConsumer(String namesrv, String group, String name) {
        return pushConsumer(namesrv, group, name, null);
    }

    private static DefaultMQPushConsumer pushConsumer(String namesrv, String group, String name,
                                                      RPCHook hook) {
        DefaultMQPushConsumer consumer = new DefaultMQPushConsumer(hook);
        consumer.setConsumerGroup(group);
        consumer.setNamesrvAddr(namesrv);
        consumer.setInstanceName(name);
        consumer.setConsumeFromWhere(ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET);
        consumer.setPollNameServerInterval(1000);
        consumer.setHeartbeatBrokerInterval(1000);
        consumer.setPersistConsumerOffsetInterval(1000);
        consumer.setVipChannelEnabled(false);
        return consumer;
    }

    /** Starts the consumer and waits for the latch; 0, or 3 when timeoutSec passed first. */
    private static int runUntil(DefaultMQPushConsumer consumer, CountDownLatch done, int timeoutSec)
        throws Exception {
        consumer.start();
        try {
            return done.await(timeoutSec, TimeUnit.SECONDS) ? 0 : 3;
        } finally {
            consumer.shutdown();
        }
    }

    /**
     * Registers a concurrent listener that prints {@code fields(m)} for every delivery; the
     * latch it returns opens once {@code want} distinct bodies arrived.
     */
    private static CountDownLatch printDistinct(DefaultMQPushConsumer consumer, int want,
                                                Function<MessageExt, String[]> fields) {
        CountDownLatch done = new CountDownLatch(want);
        Set<String> seen = ConcurrentHashMap.newKeySet();
        consumer.registerMessageListener((MessageListenerConcurrently) (msgs, ctx) -> {
            for (MessageExt m : msgs) {
                line(fields.apply(m));
                if (seen.add(text(m))) {
                    done.countDown();
                }
            }
            return ConsumeConcurrentlyStatus.CONSUME_SUCCESS;
        });
        return done;
    }

    private static void printSend(String mode, SendResult r) {
        line("SEND", mode, String.valueOf(r.getSendStatus()), r.getMsgId(),
             String.valueOf(r.getMessageQueue().getQueueId()), String.valueOf(r.getQueueOffset()));
    }

    private static int sendModes(String namesrv, String topic, int n) throws Exception {
        DefaultMQProducer producer = producer(namesrv);
        try {
            for (int i = 0; i < n; i++) {
                printSend("sync", producer.send(new Message(topic, "sync", "sync-" + i, utf8("sync-" + i))));
            }
            CountDownLatch async = new CountDownLatch(n);
            for (int i = 0; i < n; i++) {
                producer.send(new Message(topic, "async", "async-" + i, utf8("async-" + i)), new SendCallback() {
                    @Override
                    public void onSuccess(SendResult r) {
                        printSend("async", r);
                        async.countDown();
                    }

                    @Override
                    public void onException(Throwable e) {
                        line("ERROR", "async", String.valueOf(e));
                        async.countDown();
                    }
                });
            }
            if (!async.await(30, TimeUnit.SECONDS)) {
                return 3;
            }
            for (int i = 0; i < n; i++) {
                producer.sendOneway(new Message(topic, "oneway", "oneway-" + i, utf8("oneway-" + i)));
            }
            List<Message> batch = new ArrayList<>();
            for (int i = 0; i < n; i++) {
                batch.add(new Message(topic, "batch", "batch-" + i, utf8("batch-" + i)));
            }
            SendResult r = producer.send(batch);
            line("SEND", "batch", String.valueOf(r.getSendStatus()), r.getMsgId(),
                 String.valueOf(r.getMessageQueue().getQueueId()), String.valueOf(r.getQueueOffset()));
            return 0;
        } finally {
            producer.shutdown();
        }
    }

    private static int retry(String namesrv, String topic, String group, int n, int max, int timeoutSec)
            throws Exception {
        DefaultMQProducer producer = producer(namesrv);
        try {
            for (int i = 0; i < n; i++) {
                producer.send(new Message(topic, "retry", "r-" + i, utf8(String.valueOf(i))));
            }
        } finally {
            producer.shutdown();
        }
        int evens = (n + 1) / 2;
        int odds = n / 2;
        Set<Integer> succeeded = ConcurrentHashMap.newKeySet();
        Set<Integer> exhausted = ConcurrentHashMap.newKeySet();
        CountDownLatch done = new CountDownLatch(1);
        DefaultMQPushConsumer consumer = pushConsumer(namesrv, group, instance("c"));
        consumer.setMaxReconsumeTimes(max);
        consumer.setConsumeMessageBatchMaxSize(1);
        consumer.subscribe(topic, "*");
        consumer.registerMessageListener((MessageListenerConcurrently) (msgs, ctx) -> {
            MessageExt m = msgs.get(0);
            int i = Integer.parseInt(text(m));
            line("MSG", text(m), String.valueOf(m.getReconsumeTimes()), m.getTopic(), m.getMsgId());
            boolean fail = i % 2 == 1 || m.getReconsumeTimes() == 0;
            if (i % 2 == 0 && !fail) {
                succeeded.add(i);
            } else if (i % 2 == 1 && m.getReconsumeTimes() >= max) {
                exhausted.add(i);
            }
            if (succeeded.size() == evens && exhausted.size() == odds) {
                done.countDown();
            }
            return fail ? ConsumeConcurrentlyStatus.RECONSUME_LATER : ConsumeConcurrentlyStatus.CONSUME_SUCCESS;
        });
        consumer.start();
        long deadline = System.currentTimeMillis() + timeoutSec * 1000L;
        try {
            if (!done.await(timeoutSec, TimeUnit.SECONDS)) {
                return 3;
            }
            // the consumer keeps running while the last failures reach the dead letter queue
            DefaultLitePullConsumer dlq = new DefaultLitePullConsumer(group + "_dlq_reader");
            dlq.setNamesrvAddr(namesrv);
            dlq.setInstanceName(instance("dlq"));
            dlq.setVipChannelEnabled(false);
            dlq.start();
            Set<String> dead = new java.util.HashSet<>();
            try {
                String dlqTopic = "%DLQ%" + group;
                List<MessageQueue> queues = new ArrayList<>();
                while (queues.isEmpty() && System.currentTimeMillis() < deadline) {
                    try {
                        queues.addAll(dlq.fetchMessageQueues(dlqTopic));
                    } catch (Exception e) {
                        Thread.sleep(200); // the route appears once the broker re-registers
                    }
                }
                dlq.assign(queues);
                seekToBegin(dlq, queues);
                while (dead.size() < odds && System.currentTimeMillis() < deadline) {
                    for (MessageExt m : dlq.poll(1000)) {
                        line("DLQ", text(m), String.valueOf(m.getReconsumeTimes()), m.getTopic(),
                             String.valueOf(m.getProperty("RETRY_TOPIC")));
                        dead.add(text(m));
                    }
                }
            } finally {
                dlq.shutdown();
            }
            return dead.size() >= odds ? 0 : 3;
        } finally {
            consumer.shutdown();
        }
    }

    private static int orderly(String namesrv, String topic, String group, int n, int keys, int timeoutSec)
            throws Exception {
        DefaultMQProducer producer = producer(namesrv);
        try {
            for (int i = 0; i < n; i++) {
                int key = i % keys;
                SendResult r = producer.send(new Message(topic, "order", "order-" + key, utf8(key + ":" + i)),
                        (List<MessageQueue> mqs, Message msg, Object arg) -> mqs.get((Integer) arg % mqs.size()),
                        key);
                printSend("orderly", r);
            }
        } finally {
            producer.shutdown();
        }
        Set<String> seen = ConcurrentHashMap.newKeySet();
        CountDownLatch done = new CountDownLatch(1);
        DefaultMQPushConsumer consumer = pushConsumer(namesrv, group, instance("c"));
        consumer.subscribe(topic, "*");
        consumer.registerMessageListener((MessageListenerOrderly) (msgs, ctx) -> {
            for (MessageExt m : msgs) {
                line("MSG", text(m), String.valueOf(m.getQueueId()), String.valueOf(m.getQueueOffset()));
                seen.add(text(m));
            }
            if (seen.size() >= n) {
                done.countDown();
            }
            return ConsumeOrderlyStatus.SUCCESS;
        });
        return runUntil(consumer, done, timeoutSec);
    }

    /** MessageModel moved package in 5.x: set it by name so one source serves 4.9 and 5.x. */
    @SuppressWarnings({"unchecked", "rawtypes"})
    private static void setMessageModel(DefaultMQPushConsumer consumer, String model) throws Exception {
        Class type = DefaultMQPushConsumer.class.getMethod("getMessageModel").getReturnType();
        DefaultMQPushConsumer.class.getMethod("setMessageModel", type).invoke(consumer, Enum.valueOf(type, model));
    }

    private static int group(String namesrv, String topic, String group, String model, int n,
                             int timeoutSec) throws Exception {
        long deadline = System.currentTimeMillis() + timeoutSec * 1000L;
        DefaultMQProducer producer = producer(namesrv);
        int queues = producer.fetchPublishMessageQueues(topic).size();
        boolean broadcast = model.equals("BROADCASTING");
        int wanted = broadcast ? 2 * n : n;
        Set<String> seen = ConcurrentHashMap.newKeySet();
        CountDownLatch done = new CountDownLatch(1);
        List<DefaultMQPushConsumer> consumers = new ArrayList<>();
        try {
            for (String name : new String[] {"a", "b"}) {
                DefaultMQPushConsumer consumer = pushConsumer(namesrv, group, instance("c" + name));
                setMessageModel(consumer, model);
                consumer.setConsumeFromWhere(ConsumeFromWhere.CONSUME_FROM_LAST_OFFSET);
                consumer.subscribe(topic, "*");
                consumer.registerMessageListener((MessageListenerConcurrently) (msgs, ctx) -> {
                    for (MessageExt m : msgs) {
                        line("MSG", name, text(m), m.getMsgId());
                        seen.add(name + "/" + m.getMsgId());
                    }
                    if (seen.size() >= wanted) {
                        done.countDown();
                    }
                    return ConsumeConcurrentlyStatus.CONSUME_SUCCESS;
                });
                consumers.add(consumer);
                consumer.start();
            }
            // wait for the rebalance: clustering splits the queues, broadcasting gives each all
            while (true) {
                Set<MessageQueue> a = assigned(consumers.get(0), topic);
                Set<MessageQueue> b = assigned(consumers.get(1), topic);
                Set<MessageQueue> both = new java.util.HashSet<>(a);
                both.retainAll(b);
                boolean ready = broadcast ? a.size() == queues && b.size() == queues
                        : !a.isEmpty() && !b.isEmpty() && both.isEmpty() && a.size() + b.size() == queues;
                if (ready) {
                    line("ASSIGNED", String.valueOf(a.size()), String.valueOf(b.size()));
                    break;
                }
                if (System.currentTimeMillis() > deadline) {
                    line("UNBALANCED", String.valueOf(a), String.valueOf(b));
                    return 3;
                }
                Thread.sleep(100);
            }
            for (int i = 0; i < n; i++) {
                producer.send(new Message(topic, "g", "g-" + i, utf8("g-" + i)));
            }
            return done.await(Math.max(1, deadline - System.currentTimeMillis()), TimeUnit.MILLISECONDS) ? 0 : 3;
        } finally {
            producer.shutdown();
            for (DefaultMQPushConsumer consumer : consumers) {
                consumer.shutdown();
            }
        }
    }

    /** The queues of ``topic`` a push consumer is pulling now (its process queue table). */
    private static Set<MessageQueue> assigned(DefaultMQPushConsumer consumer, String topic) {
        Set<MessageQueue> out = new java.util.HashSet<>();
        for (MessageQueue mq : consumer.getDefaultMQPushConsumerImpl().getRebalanceImpl()
                .getProcessQueueTable().keySet()) {
            if (mq.getTopic().equals(topic)) {
                out.add(mq);
            }
        }
        return out;
    }

    private static int litePull(String namesrv, String topic, String group, int n, int timeoutSec)
            throws Exception {
        DefaultMQProducer producer = producer(namesrv);
        try {
            for (int i = 0; i < n; i++) {
                producer.send(new Message(topic, "lite", "lite-" + i, utf8("lite-" + i)));
            }
        } finally {
            producer.shutdown();
        }
        DefaultLitePullConsumer consumer = new DefaultLitePullConsumer(group);
        consumer.setNamesrvAddr(namesrv);
        consumer.setInstanceName(instance("l"));
        consumer.setConsumeFromWhere(ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET);
        consumer.setPollNameServerInterval(1000);
        consumer.setHeartbeatBrokerInterval(1000);
        consumer.setAutoCommitIntervalMillis(1000);
        consumer.setVipChannelEnabled(false);
        consumer.subscribe(topic, "*");
        consumer.start();
        Set<String> seen = new java.util.HashSet<>();
        long deadline = System.currentTimeMillis() + timeoutSec * 1000L;
        try {
            while (seen.size() < n && System.currentTimeMillis() < deadline) {
                for (MessageExt m : consumer.poll(1000)) {
                    line("MSG", text(m), String.valueOf(m.getQueueId()), String.valueOf(m.getQueueOffset()));
                    seen.add(text(m));
                }
            }
            consumer.commitSync();
        } finally {
            consumer.shutdown();
        }
        return seen.size() >= n ? 0 : 3;
    }

    private static int compacted(String namesrv, String topic, String group, int keys, int rounds,
                                 int timeoutSec) throws Exception {
        DefaultMQProducer producer = producer(namesrv);
        try {
            for (int r = 0; r < rounds; r++) {
                for (int k = 0; k < keys; k++) {
                    String key = "key-" + k;
                    Message msg = new Message(topic, "tag1", key, utf8("v" + k + "-" + r));
                    SendResult sent = producer.send(msg, (mqs, message, shardingKey) -> {
                        int select = Math.abs(shardingKey.hashCode());
                        if (select < 0) {
                            select = 0;
                        }
                        return mqs.get(select % mqs.size());
                    }, key);
                    line("SEND", key, String.valueOf(sent.getMessageQueue().getQueueId()),
                         String.valueOf(sent.getQueueOffset()));
                }
            }
        } finally {
            producer.shutdown();
        }
        line("SENT", String.valueOf(keys * rounds));
        System.out.flush();
        new java.io.BufferedReader(new java.io.InputStreamReader(System.in, StandardCharsets.UTF_8))
            .readLine();
        DefaultLitePullConsumer consumer = new DefaultLitePullConsumer(group);
        consumer.setNamesrvAddr(namesrv);
        consumer.setInstanceName(instance("c"));
        consumer.setPullThreadNums(4);
        consumer.setVipChannelEnabled(false);
        consumer.start();
        java.util.Map<String, String> kvStore = new java.util.TreeMap<>();
        String last = "-" + (rounds - 1);
        long deadline = System.currentTimeMillis() + timeoutSec * 1000L;
        try {
            java.util.Collection<MessageQueue> queues = consumer.fetchMessageQueues(topic);
            consumer.assign(queues);
            seekToBegin(consumer, queues);
            while (System.currentTimeMillis() < deadline && !(kvStore.size() == keys
                    && kvStore.values().stream().allMatch(v -> v.endsWith(last)))) {
                for (MessageExt m : consumer.poll(1000)) {
                    line("MSG", m.getKeys(), text(m), String.valueOf(m.getQueueId()),
                         String.valueOf(m.getQueueOffset()));
                    kvStore.put(m.getKeys(), text(m));
                }
            }
        } finally {
            consumer.shutdown();
        }
        kvStore.forEach((k, v) -> line("KV", k, v));
        return kvStore.size() == keys ? 0 : 3;
    }

    /**
     * seekToBegin on each queue, once more when it fails: assign() starts the lite pull consumer's
     * pull tasks at once, a seek cancels a queue's task with an interrupt, and an interrupted
     * request makes the client close its connection to the broker (invokeSync: "send request
     * exception, so close the channel"), failing the other requests under way on it, the seek's
     * own GET_MIN_OFFSET among them. A client-side race, against any broker.
     */
    private static void seekToBegin(DefaultLitePullConsumer consumer, java.util.Collection<MessageQueue> queues)
            throws Exception {
        for (MessageQueue mq : queues) {
            for (int attempt = 1; ; attempt++) {
                try {
                    consumer.seekToBegin(mq);
                    break;
                } catch (MQClientException e) {
                    if (attempt == 3) {
                        throw e;
                    }
                }
            }
        }
    }

    private static int sql(String namesrv, String topic, String group, int n, int expect, String expression,
                           int timeoutSec) throws Exception {
        DefaultMQProducer producer = producer(namesrv);
        try {
            for (int i = 0; i < n; i++) {
                Message m = new Message(topic, i % 2 == 0 ? "even" : "odd", utf8("sql-" + i));
                m.putUserProperty("n", String.valueOf(i));
                producer.send(m);
            }
        } finally {
            producer.shutdown();
        }
        DefaultMQPushConsumer consumer = pushConsumer(namesrv, group, instance("s"));
        consumer.subscribe(topic, MessageSelector.bySql(expression));
        CountDownLatch done = printDistinct(consumer, expect,
                                            m -> new String[] {"MSG", text(m), m.getUserProperty("n"), m.getTags()});
        try {
            consumer.start();
        } catch (Exception e) {
            line("REFUSED", String.valueOf(e.getMessage()).replace('\n', ' ').replace('\t', ' '));
            return 0;
        }
        try {
            return done.await(timeoutSec, TimeUnit.SECONDS) ? 0 : 3;
        } finally {
            consumer.shutdown();
        }
    }

    private static int query(String namesrv, String topic, String key, String offsetMsgId) throws Exception {
        DefaultMQProducer producer = producer(namesrv);
        try {
            for (MessageExt m : producer.queryMessage(topic, key, 32, 0, Long.MAX_VALUE).getMessageList()) {
                line("FOUND", text(m), m.getMsgId());
            }
            MessageExt m = producer.viewMessage(topic, offsetMsgId);
            line("VIEW", text(m), m.getTopic());
            return 0;
        } finally {
            producer.shutdown();
        }
    }

    private static int acl(String namesrv, String topic, String group, int n, String accessKey,
                           String secretKey, int timeoutSec) throws Exception {
        RPCHook hook = new AclClientRPCHook(new SessionCredentials(accessKey, secretKey));
        DefaultMQProducer producer = producer(namesrv, hook);
        try {
            for (int i = 0; i < n; i++) {
                printSend("sync", producer.send(new Message(topic, "acl", utf8("acl-" + i))));
            }
            List<Message> batch = new ArrayList<>();
            batch.add(new Message(topic, "acl", utf8("acl-batch-0")));
            batch.add(new Message(topic, "acl", utf8("acl-batch-1")));
            printSend("batch", producer.send(batch));
        } finally {
            producer.shutdown();
        }
        DefaultMQPushConsumer consumer = pushConsumer(namesrv, group, instance("acl"), hook);
        consumer.subscribe(topic, "*");
        CountDownLatch done = printDistinct(consumer, n + 2, m -> new String[] {"MSG", text(m)});
        consumer.start();
        try {
            if (!done.await(timeoutSec, TimeUnit.SECONDS)) {
                return 3;
            }
        } finally {
            consumer.shutdown();
        }
        RPCHook wrong = new AclClientRPCHook(new SessionCredentials(accessKey, secretKey + "-wrong"));
        refusedSend("wrong-secret", namesrv, wrong, topic);
        refusedSend("unsigned", namesrv, null, topic);
        return 0;
    }

    private static void refusedSend(String mode, String namesrv, RPCHook hook, String topic)
        throws Exception {
        DefaultMQProducer producer = producer(namesrv, hook);
        producer.setRetryTimesWhenSendFailed(0);
        try {
            printSend(mode, producer.send(new Message(topic, "acl", utf8("refused"))));
        } catch (Exception e) {
            StringBuilder why = new StringBuilder();
            for (Throwable t = e; t != null; t = t.getCause()) {  // the broker's remark is a cause
                why.append(t.getMessage()).append(" | ");
            }
            line("REFUSED", mode, why.toString().replace('\n', ' ').replace('\t', ' '));
        } finally {
            producer.shutdown();
        }
    }

    private static int request(String namesrv, String topic, int n, long timeoutMs) throws Exception {
        DefaultMQProducer producer = producer(namesrv);
        try {
            for (int i = 0; i < n; i++) {
                CompletableFuture<Message> replied = new CompletableFuture<>();
                producer.request(new Message(topic, "rpc", utf8("ask-" + i)), new RequestCallback() {
                    @Override
                    public void onSuccess(Message m) {
                        if (m != null) {
                            replied.complete(m);
                        }
                    }

                    @Override
                    public void onException(Throwable e) {
                        replied.completeExceptionally(e);
                    }
                }, timeoutMs);
                Message reply = replied.get(timeoutMs + 5000, TimeUnit.MILLISECONDS);
                line("REPLY", new String(reply.getBody(), StandardCharsets.UTF_8), reply.getTopic(),
                     reply.getProperty("CORRELATION_ID"));
            }
            return 0;
        } finally {
            producer.shutdown();
        }
    }

    private static int respond(String namesrv, String topic, String group, int n, int timeoutSec)
        throws Exception {
        DefaultMQProducer replier = producer(namesrv);
        CountDownLatch done = new CountDownLatch(n);
        DefaultMQPushConsumer consumer = pushConsumer(namesrv, group, instance("respond"));
        consumer.subscribe(topic, "*");
        consumer.registerMessageListener((MessageListenerConcurrently) (msgs, ctx) -> {
            for (MessageExt m : msgs) {
                try {
                    Message reply = MessageUtil.createReplyMessage(m, utf8("re:" + text(m)));
                    line("ANSWERED", text(m), String.valueOf(replier.send(reply).getSendStatus()));
                    done.countDown();
                } catch (Exception e) {
                    line("ERROR", text(m), String.valueOf(e).replace('\n', ' '));
                    return ConsumeConcurrentlyStatus.RECONSUME_LATER;
                }
            }
            return ConsumeConcurrentlyStatus.CONSUME_SUCCESS;
        });
        consumer.start();
        try {
            return done.await(timeoutSec, TimeUnit.SECONDS) ? 0 : 3;
        } finally {
            consumer.shutdown();
            replier.shutdown();
        }
    }

    private static int timer(String namesrv, String topic, String group, int n, long delayMs,
                             int timeoutSec) throws Exception {
        DefaultMQProducer producer = producer(namesrv);
        try {
            for (int i = 0; i < n; i++) {
                Message m = new Message(topic, "timer", utf8("timer-" + i));
                long due = System.currentTimeMillis() + delayMs;
                // what Message.setDeliverTimeMs(due) does in 5.x (absent from 4.9.x)
                MessageAccessor.putProperty(m, "TIMER_DELIVER_MS", String.valueOf(due));
                producer.send(m);
                line("DUE", "timer-" + i, String.valueOf(due));
            }
            // one more, recalled before it is due (5.3's recallMessage, through reflection: 4.9.x
            // has neither it nor SendResult.getRecallHandle)
            Message m = new Message(topic, "timer", utf8("timer-recalled"));
            MessageAccessor.putProperty(m, "TIMER_DELIVER_MS", String.valueOf(System.currentTimeMillis() + delayMs));
            SendResult sent = producer.send(m);
            String handle = (String) SendResult.class.getMethod("getRecallHandle").invoke(sent);
            Object id = DefaultMQProducer.class.getMethod("recallMessage", String.class, String.class)
                .invoke(producer, topic, handle);
            line("RECALLED", String.valueOf(id));
        } finally {
            producer.shutdown();
        }
        DefaultMQPushConsumer consumer = pushConsumer(namesrv, group, instance("timer"));
        consumer.subscribe(topic, "*");
        CountDownLatch done = printDistinct(
            consumer, n, m -> new String[] {"MSG", text(m), String.valueOf(System.currentTimeMillis())});
        return runUntil(consumer, done, timeoutSec);
    }

    /** Compression types by name through reflection: 4.9.x has no CompressionType. */
    @SuppressWarnings({"unchecked", "rawtypes"})
    private static void setCompressType(DefaultMQProducer producer, String type) throws Exception {
        Class kind = Class.forName("org.apache.rocketmq.common.compression.CompressionType");
        DefaultMQProducer.class.getMethod("setCompressType", kind).invoke(producer, Enum.valueOf(kind, type));
    }

    private static int compressed(String namesrv, String topic, int n, int size) throws Exception {
        DefaultMQProducer producer = producer(namesrv);
        producer.setCompressMsgBodyOverHowmuch(1024);
        try {
            for (String type : new String[] {"ZLIB", "LZ4", "ZSTD"}) {
                setCompressType(producer, type);
                for (int i = 0; i < n; i++) {
                    StringBuilder body = new StringBuilder(type + "-" + i + ":");
                    while (body.length() < size) {
                        body.append("rocketmq-body-");
                    }
                    SendResult r = producer.send(new Message(topic, utf8(body.substring(0, size))));
                    line("SEND", type, String.valueOf(r.getSendStatus()));
                }
            }
            return 0;
        } finally {
            producer.shutdown();
        }
    }

    private static int digests(String namesrv, String topic, String group, int n, int timeoutSec)
        throws Exception {
        DefaultMQPushConsumer consumer = pushConsumer(namesrv, group, instance("digests"));
        consumer.subscribe(topic, "*");
        CountDownLatch done = printDistinct(consumer, n, m -> {
            String body = text(m);
            return new String[] {"MSG", body.substring(0, Math.max(0, body.indexOf(':'))),
                                 String.valueOf(m.getBody().length), md5(m.getBody())};
        });
        return runUntil(consumer, done, timeoutSec);
    }

    private static String md5(byte[] data) throws RuntimeException {
        try {
            StringBuilder hex = new StringBuilder();
            for (byte b : java.security.MessageDigest.getInstance("MD5").digest(data)) {
                hex.append(String.format("%02x", b));
            }
            return hex.toString();
        } catch (java.security.NoSuchAlgorithmException e) {
            throw new RuntimeException(e);
        }
    }

    private static int pop(String namesrv, String topic, String group, int n, int timeoutSec)
        throws Exception {
        DefaultMQPushConsumer consumer = pushConsumer(namesrv, group, instance("pop"));
        // 5.x only (absent from 4.9.x): the broker allocates the queues (QUERY_ASSIGNMENT)
        DefaultMQPushConsumer.class.getMethod("setClientRebalance", boolean.class).invoke(consumer, false);
        consumer.setConsumeMessageBatchMaxSize(1);
        consumer.subscribe(topic, "*");
        CountDownLatch done = new CountDownLatch(n);
        Set<String> consumed = ConcurrentHashMap.newKeySet();
        consumer.registerMessageListener((MessageListenerConcurrently) (msgs, ctx) -> {
            MessageExt m = msgs.get(0);
            String body = text(m);
            line("MSG", body, String.valueOf(m.getReconsumeTimes()), String.valueOf(m.getProperty("POP_CK") != null));
            if (consumed.add(body)) {
                done.countDown();
            }
            return ConsumeConcurrentlyStatus.CONSUME_SUCCESS;
        });
        consumer.start();
        try {
            DefaultMQProducer producer = producer(namesrv);
            try {
                for (int i = 0; i < n; i++) {
                    producer.send(new Message(topic, utf8("pop-" + i)));
                }
            } finally {
                producer.shutdown();
            }
            return done.await(timeoutSec, TimeUnit.SECONDS) ? 0 : 3;
        } finally {
            consumer.shutdown();
        }
    }
}
