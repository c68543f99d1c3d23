import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collections;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeSet;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.function.BooleanSupplier;
import org.apache.rocketmq.client.apis.ClientConfiguration;
import org.apache.rocketmq.client.apis.ClientConfigurationBuilder;
import org.apache.rocketmq.client.apis.ClientServiceProvider;
import org.apache.rocketmq.client.apis.consumer.ConsumeResult;
import org.apache.rocketmq.client.apis.consumer.FilterExpression;
import org.apache.rocketmq.client.apis.consumer.FilterExpressionType;
import org.apache.rocketmq.client.apis.consumer.PushConsumer;
import org.apache.rocketmq.client.apis.consumer.SimpleConsumer;
import org.apache.rocketmq.client.apis.message.Message;
import org.apache.rocketmq.client.apis.message.MessageBuilder;
import org.apache.rocketmq.client.apis.message.MessageView;
import org.apache.rocketmq.client.apis.producer.Producer;
import org.apache.rocketmq.client.apis.producer.Transaction;
import org.apache.rocketmq.client.apis.producer.TransactionResolution;

/**
 * The official RocketMQ 5 Java client over gRPC (rocketmq-client-java, unmodified) against a
 * broker's gRPC endpoint, for the interop tests: {@code scenario HOST:PORT [plain]} (the client's
 * default settings, so TLS, unless told plain: enableSsl(false)). Topics N5 (NORMAL),
 * F5 (FIFO), D5 (MIXED) and X5 (TRANSACTION) and the FIFO group fifo_g must exist; the delay
 * message "recalled" is recalled before it is due. Prints
 * tab-separated lines: SENT id; SIMPLE body tag keys seq attempt id; AGAIN body attempt;
 * FIFO body; PUSH body attempt receivedMs; CHECKED body; DUE ms; DONE.
 *
 * <p>{@code cluster HOST:PORT TOPIC COUNT}: a producer sends COUNT messages to TOPIC (served by
 * several brokers; the client is given one broker's endpoint), then push consumer cluster_g
 * consumes them (the client's default settings). Prints CSENT body; CGOT body; DONE.
 */
public final class BolideGrpcClient {
    private static final ClientServiceProvider PROVIDER = ClientServiceProvider.loadService();

    private static String text(ByteBuffer body) {
        ByteBuffer copy = body.duplicate();
        byte[] bytes = new byte[copy.remaining()];
        copy.get(bytes);
        return new String(bytes, StandardCharsets.UTF_8);
    }

    private static void print(Object... fields) {
        StringBuilder line = new StringBuilder();
        for (Object field : fields) {
            if (line.length() > 0) {
                line.append('\t');
            }
            line.append(field);
        }
        System.out.println(line);
        System.out.flush();
    }

    private static MessageBuilder message(String topic, String body) {
        return PROVIDER.newMessageBuilder().setTopic(topic).setBody(body.getBytes(StandardCharsets.UTF_8));
    }

    private static void signal(Object done) {
        synchronized (done) {
            done.notifyAll();
        }
    }

    /** Wait until {@code ready} holds (checked on each {@link #signal} and every 500 ms), at most {@code millis}. */
    private static void await(Object done, BooleanSupplier ready, long millis) throws InterruptedException {
        long until = System.currentTimeMillis() + millis;
        synchronized (done) {
            while (!ready.getAsBoolean() && System.currentTimeMillis() < until) {
                done.wait(500);
            }
        }
    }

    private static void cluster(String endpoint, String topic, int count) throws Exception {
        ClientConfiguration config = ClientConfiguration.newBuilder().setEndpoints(endpoint)
            .setRequestTimeout(Duration.ofSeconds(5)).build();
        Producer producer = PROVIDER.newProducerBuilder().setClientConfiguration(config).setTopics(topic).build();
        for (int i = 0; i < count; i++) {
            producer.send(message(topic, "c" + i).build());
            print("CSENT", "c" + i);
        }
        producer.close();
        Set<String> got = ConcurrentHashMap.newKeySet();
        Object done = new Object();
        PushConsumer push = PROVIDER.newPushConsumerBuilder().setClientConfiguration(config).setConsumerGroup("cluster_g")
            .setSubscriptionExpressions(Collections.singletonMap(topic, FilterExpression.SUB_ALL)).setMessageListener(view -> {
                String body = text(view.getBody());
                print("CGOT", body);
                got.add(body);
                signal(done);
                return ConsumeResult.SUCCESS;
            }).build();
        await(done, () -> got.size() >= count, 60_000);
        print("DONE");
        System.exit(0);  // not push.close(): it waits for the long polls in flight
    }

    public static void main(String[] args) throws Exception {
        if (args.length == 4 && "cluster".equals(args[0])) {
            cluster(args[1], args[2], Integer.parseInt(args[3]));
            return;
        }
        if (args.length < 2 || !"scenario".equals(args[0])) {
            System.err.println("usage: BolideGrpcClient scenario HOST:PORT [plain] | cluster HOST:PORT TOPIC COUNT");
            System.exit(2);
        }
        ClientConfigurationBuilder builder = ClientConfiguration.newBuilder().setEndpoints(args[1])
            .setRequestTimeout(Duration.ofSeconds(5));
        if (args.length > 2 && "plain".equals(args[2])) {
            builder.enableSsl(false); // else the client's default: TLS
        }
        ClientConfiguration config = builder.build();
        Producer producer = PROVIDER.newProducerBuilder().setClientConfiguration(config)
            .setTopics("N5", "F5", "D5", "X5")
            .setTransactionChecker(view -> {
                print("CHECKED", text(view.getBody()));
                return TransactionResolution.COMMIT;
            }).build();
        for (int i = 0; i < 4; i++) {
            Message m = message("N5", "n" + i).setTag("TagA").setKeys("key" + i).addProperty("seq", String.valueOf(i))
                .build();
            print("SENT", producer.send(m).getMessageId());
        }
        for (int i = 0; i < 3; i++) {
            for (String group : new String[] {"ga", "gb"}) {
                producer.send(message("F5", group + "-" + i).setMessageGroup(group).build());
            }
        }
        long due = System.currentTimeMillis() + 2000;
        producer.send(message("D5", "later").setDeliveryTimestamp(due).build());
        print("DUE", due);
        producer.send(message("D5", "retry-me").build());
        String recallHandle = producer.send(message("D5", "recalled").setDeliveryTimestamp(due).build()).getRecallHandle();
        producer.recallMessage("D5", recallHandle);
        String[][] transactions = {{"tx-commit", "commit"}, {"tx-rollback", "rollback"}, {"tx-check", ""}};
        for (String[] tx : transactions) {
            Transaction transaction = producer.beginTransaction();
            producer.send(message("X5", tx[0]).build(), transaction);
            if ("commit".equals(tx[1])) {
                transaction.commit();
            } else if ("rollback".equals(tx[1])) {
                transaction.rollback();
            }
        }

        SimpleConsumer simple = PROVIDER.newSimpleConsumerBuilder().setClientConfiguration(config)
            .setConsumerGroup("simple_g").setAwaitDuration(Duration.ofSeconds(5))
            .setSubscriptionExpressions(Collections.singletonMap("N5", new FilterExpression("TagA", FilterExpressionType.TAG)))
            .build();
        List<MessageView> got = new ArrayList<>();
        long deadline = System.currentTimeMillis() + 20_000;
        while (got.size() < 4 && System.currentTimeMillis() < deadline) {
            got.addAll(simple.receive(16, Duration.ofSeconds(30)));
        }
        for (MessageView view : got) {
            print("SIMPLE", text(view.getBody()), view.getTag().orElse(""), String.join(",", new TreeSet<>(view.getKeys())),
                view.getProperties().get("seq"), view.getDeliveryAttempt(), view.getMessageId());
        }
        simple.changeInvisibleDuration(got.get(0), Duration.ofSeconds(1));
        List<MessageView> again = new ArrayList<>();
        deadline = System.currentTimeMillis() + 20_000;
        while (again.isEmpty() && System.currentTimeMillis() < deadline) {
            again.addAll(simple.receive(16, Duration.ofSeconds(30)));
        }
        for (MessageView view : again) {
            print("AGAIN", text(view.getBody()), view.getDeliveryAttempt());
            simple.ack(view);
        }
        for (MessageView view : got.subList(1, got.size())) {
            simple.ack(view);
        }
        simple.close();

        SimpleConsumer fifo = PROVIDER.newSimpleConsumerBuilder().setClientConfiguration(config)
            .setConsumerGroup("fifo_g").setAwaitDuration(Duration.ofSeconds(5))
            .setSubscriptionExpressions(Collections.singletonMap("F5", FilterExpression.SUB_ALL)).build();
        int fifoCount = 0;
        deadline = System.currentTimeMillis() + 30_000;
        while (fifoCount < 6 && System.currentTimeMillis() < deadline) {
            for (MessageView view : fifo.receive(16, Duration.ofSeconds(30))) {
                print("FIFO", text(view.getBody()));
                fifo.ack(view);
                fifoCount++;
            }
        }
        fifo.close();

        Set<String> wanted = ConcurrentHashMap.newKeySet();
        List<String> retried = new CopyOnWriteArrayList<>();
        Object done = new Object();
        Map<String, FilterExpression> subscriptions = new HashMap<>();
        subscriptions.put("D5", FilterExpression.SUB_ALL);
        subscriptions.put("X5", FilterExpression.SUB_ALL);
        PushConsumer push = PROVIDER.newPushConsumerBuilder().setClientConfiguration(config).setConsumerGroup("push_g")
            .setSubscriptionExpressions(subscriptions).setMessageListener(view -> {
                String body = text(view.getBody());
                print("PUSH", body, view.getDeliveryAttempt(), System.currentTimeMillis());
                wanted.add(body);
                if ("retry-me".equals(body)) {
                    retried.add(String.valueOf(view.getDeliveryAttempt()));
                    if (view.getDeliveryAttempt() == 1) {
                        return ConsumeResult.FAILURE;
                    }
                }
                signal(done);
                return ConsumeResult.SUCCESS;
            }).build();
        await(done, () -> wanted.containsAll(List.of("later", "retry-me", "tx-commit", "tx-check"))
            && retried.size() >= 2, 60_000);
        producer.close();
        print("DONE");
        // not push.close(): it waits for the consumer's receives in flight (long polls of 20 s)
        System.exit(0);
    }
}
