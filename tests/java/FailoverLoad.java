import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.util.ArrayList;
import java.util.List;
import java.util.Set;
import java.util.TreeSet;
import java.util.concurrent.ConcurrentHashMap;
import org.apache.rocketmq.client.consumer.DefaultMQPushConsumer;
import org.apache.rocketmq.client.consumer.listener.ConsumeConcurrentlyStatus;
import org.apache.rocketmq.client.consumer.listener.MessageListenerConcurrently;
import org.apache.rocketmq.client.producer.DefaultMQProducer;
import org.apache.rocketmq.client.producer.SendResult;
import org.apache.rocketmq.client.producer.SendStatus;
import org.apache.rocketmq.common.consumer.ConsumeFromWhere;
import org.apache.rocketmq.common.message.Message;
import org.apache.rocketmq.common.message.MessageExt;

/**
 * Messages produced without pause while the test fails the broker set over (RocketMQ 5.3.3
 * client, compiled by tests/support/java_rocketmq5.py with javac into the test's temp dir). Counts
 * what a failover may not lose: every message the broker acknowledged with SEND_OK (with
 * allAckInSyncStateSet=true, once every in-sync replica holds it) must reach the consumer. A send
 * that failed or came back with another status is the producer's to retry and is only counted.
 *
 *   FailoverLoad NAMESRV TOPIC DIR   the topic must exist. Sends one message every 10 ms (one
 *        thread, synchronous sends) to a DefaultMQProducer and receives with a DefaultMQPushConsumer
 *        of a new group, both given only NAMESRV and asking it for routes every second. Writes
 *        DIR/progress every 200 ms ("acked failed received longest_gap_ms"); when DIR/stop appears,
 *        stops sending, waits up to 90 s for every acknowledged message, prints
 *        RESULT acked=.. failed=.. received=.. lost=.. longest_gap_ms=.. lost_ids=[..] and exits 0
 *        only when none was lost.
 */
public class FailoverLoad {
    static final Set<Integer> received = ConcurrentHashMap.newKeySet();
    static final Set<Integer> acked = ConcurrentHashMap.newKeySet();
    static volatile int failed;
    static volatile long longestGapMs;

    public static void main(String[] a) throws Exception {
        if (a.length != 3) {
            System.err.println("usage: FailoverLoad NAMESRV TOPIC DIR");
            System.exit(2);
        }
        String ns = a[0], topic = a[1];
        Path dir = Path.of(a[2]);
        String run = Long.toHexString(System.nanoTime());
        String prefix = run + ":";
        DefaultMQPushConsumer consumer = new DefaultMQPushConsumer("failover_cg_" + run);
        consumer.setNamesrvAddr(ns);
        consumer.setInstanceName("failover-c-" + run);
        consumer.setPollNameServerInterval(1000);
        consumer.setConsumeFromWhere(ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET);
        consumer.subscribe(topic, "*");
        consumer.registerMessageListener((MessageListenerConcurrently) (msgs, ctx) -> {
            for (MessageExt m : msgs) {
                String body = new String(m.getBody(), StandardCharsets.UTF_8);
                if (body.startsWith(prefix)) received.add(Integer.parseInt(body.substring(prefix.length())));
            }
            return ConsumeConcurrentlyStatus.CONSUME_SUCCESS;
        });
        consumer.start();
        DefaultMQProducer producer = new DefaultMQProducer("failover_pg_" + run);
        producer.setNamesrvAddr(ns);
        producer.setInstanceName("failover-p-" + run);
        producer.setPollNameServerInterval(1000);
        producer.setSendMsgTimeout(3000);
        producer.start();

        Thread reporter = new Thread(() -> report(dir));
        reporter.setDaemon(true);
        reporter.start();
        long lastAck = System.currentTimeMillis();
        for (int i = 0; !Files.exists(dir.resolve("stop")); i++) {
            Message m = new Message(topic, "failover", run + "-" + i, (prefix + i).getBytes(StandardCharsets.UTF_8));
            try {
                SendResult sr = producer.send(m);
                if (sr.getSendStatus() == SendStatus.SEND_OK) {
                    acked.add(i);
                    long now = System.currentTimeMillis();
                    longestGapMs = Math.max(longestGapMs, now - lastAck);
                    lastAck = now;
                } else {
                    note(i, sr.getSendStatus() + " from " + sr.getMessageQueue());
                }
            } catch (Exception e) {
                note(i, e.toString());
            }
            Thread.sleep(10);
        }
        long deadline = System.currentTimeMillis() + 90_000;
        while (!received.containsAll(acked) && System.currentTimeMillis() < deadline) Thread.sleep(200);
        Set<Integer> lost = new TreeSet<>(acked);
        lost.removeAll(received);
        List<Integer> some = new ArrayList<>(lost).subList(0, Math.min(20, lost.size()));
        System.out.printf("RESULT acked=%d failed=%d received=%d lost=%d longest_gap_ms=%d lost_ids=%s%n",
            acked.size(), failed, received.size(), lost.size(), longestGapMs, some);
        producer.shutdown();
        consumer.shutdown();
        System.exit(lost.isEmpty() ? 0 : 1);
    }

    /** A failed send: counted, and the first few of each run of failures printed. */
    static void note(int i, String why) {
        if (failed++ % 20 < 3) System.out.println("send " + i + " failed (" + failed + "): " + why);
    }

    /** The progress file, replaced whole every 200 ms so that a reader never sees half of it. */
    static void report(Path dir) {
        Path tmp = dir.resolve("progress.tmp");
        while (true) {
            String line = acked.size() + " " + failed + " " + received.size() + " " + longestGapMs + "\n";
            try {
                Files.writeString(tmp, line);
                Files.move(tmp, dir.resolve("progress"), StandardCopyOption.ATOMIC_MOVE,
                    StandardCopyOption.REPLACE_EXISTING);
                Thread.sleep(200);
            } catch (Exception e) {
                return;
            }
        }
    }
}
