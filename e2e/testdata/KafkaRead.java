// A consumer of Kafka's own Java client reading a topic from its start, as a consumer of the
// relay's records would, whatever codec the record batches were compressed with (the client
// needs the codec's library on its classpath: lz4-java, zstd-jni, snappy-java).
// Run by the e2e tests as a single-file program:
//   java -cp '<jars>/*' KafkaRead.java <bootstrap servers> <topic> <records wanted>
// Prints each record as its outbox-id header, a tab and its value in base64, one line a record.
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.Base64;
import java.util.List;
import java.util.Properties;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.header.Header;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;

public class KafkaRead {
	public static void main(String[] args) throws Exception {
		Properties p = new Properties();
		p.put("bootstrap.servers", args[0]);
		p.put("key.deserializer", ByteArrayDeserializer.class.getName());
		p.put("value.deserializer", ByteArrayDeserializer.class.getName());
		p.put("enable.auto.commit", "false");
		p.put("auto.offset.reset", "earliest");
		int want = Integer.parseInt(args[2]);
		try (KafkaConsumer<byte[], byte[]> c = new KafkaConsumer<>(p)) {
			List<TopicPartition> tps = c.partitionsFor(args[1]).stream()
					.map(i -> new TopicPartition(i.topic(), i.partition())).toList();
			c.assign(tps);
			c.seekToBeginning(tps);
			int n = 0;
			long deadline = System.currentTimeMillis() + 60_000;
			while (n < want && System.currentTimeMillis() < deadline) {
				for (ConsumerRecord<byte[], byte[]> r : c.poll(Duration.ofMillis(500))) {
					Header h = r.headers().lastHeader("outbox-id");
					String id = h == null ? "" : new String(h.value(), StandardCharsets.UTF_8);
					System.out.println(id + "\t" + Base64.getEncoder().encodeToString(r.value()));
					n++;
				}
			}
		}
	}
}
