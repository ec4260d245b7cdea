// Computes metadata hashes with Apache Kafka's own group-coordinator code, to check
// rebalance/metadata_hash.py against it. Run on the broker's classpath (Java 17 source launch):
//   java -cp '<kafka-libs>/*' tests/vectors/KafkaMetadataHash.java < cases.tsv
// Each input line is one case, tab-separated:
//   topic  <xxh3|murmur3>  <topic-uuid>  <name>  <racks>   racks: partitions split by '|',
//                                                         a partition's racks by ','
//   group  <xxh3|murmur3>  <name>=<hash>,<name>=<hash>...
// It prints one signed 64-bit hash per line. "xxh3" calls Kafka's Utils.computeTopicHash and
// Utils.computeGroupHash (XXH3-64 via hash4j); "murmur3" feeds the same sequence of values to
// hash4j's Murmur3 x64/128 and keeps its first 64 bits.
import com.dynatrace.hash4j.hashing.HashStream64;
import com.dynatrace.hash4j.hashing.Hashing;
import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.lang.reflect.Proxy;
import java.util.ArrayList;
import java.util.Collections;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.UUID;
import org.apache.kafka.common.Uuid;
import org.apache.kafka.coordinator.common.runtime.CoordinatorMetadataImage;
import org.apache.kafka.coordinator.group.Utils;

public class KafkaMetadataHash {
    public static void main(String[] args) throws Exception {
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, "UTF-8"));
        String line;
        while ((line = in.readLine()) != null) {
            if (line.isEmpty()) continue;
            String[] f = line.split("\t", -1);
            if (f[0].equals("topic")) {
                System.out.println(topic(f[1], UUID.fromString(f[2]), f[3], racks(f[4])));
            } else {
                System.out.println(group(f[1], f[2]));
            }
        }
    }

    static List<List<String>> racks(String spec) {
        List<List<String>> result = new ArrayList<>();
        if (spec.equals("-")) return result;
        for (String partition : spec.split("\\|", -1)) {
            List<String> racks = new ArrayList<>();
            if (!partition.isEmpty()) Collections.addAll(racks, partition.split(",", -1));
            result.add(racks);
        }
        return result;
    }

    static long topic(String algorithm, UUID id, String name, List<List<String>> racks) {
        Uuid kafkaId = new Uuid(id.getMostSignificantBits(), id.getLeastSignificantBits());
        if (algorithm.equals("xxh3")) {
            Object topic = Proxy.newProxyInstance(
                KafkaMetadataHash.class.getClassLoader(),
                new Class<?>[] {CoordinatorMetadataImage.TopicMetadata.class},
                (proxy, method, a) -> switch (method.getName()) {
                    case "name" -> name;
                    case "id" -> kafkaId;
                    case "partitionCount" -> racks.size();
                    case "partitionRacks" -> new ArrayList<>(racks.get((Integer) a[0]));
                    default -> throw new UnsupportedOperationException(method.getName());
                });
            CoordinatorMetadataImage image = (CoordinatorMetadataImage) Proxy.newProxyInstance(
                KafkaMetadataHash.class.getClassLoader(),
                new Class<?>[] {CoordinatorMetadataImage.class},
                (proxy, method, a) -> switch (method.getName()) {
                    case "topicMetadata" -> Optional.of(topic);
                    default -> throw new UnsupportedOperationException(method.getName());
                });
            return Utils.computeTopicHash(name, image);
        }
        HashStream64 hasher = Hashing.murmur3_128().hashStream();
        hasher.putByte((byte) 0)
            .putLong(id.getMostSignificantBits())
            .putLong(id.getLeastSignificantBits())
            .putString(name)
            .putInt(racks.size());
        for (int i = 0; i < racks.size(); i++) {
            hasher.putInt(i);
            List<String> sorted = new ArrayList<>(racks.get(i));
            Collections.sort(sorted);
            for (String rack : sorted) hasher.putInt(rack.length()).putString(rack);
        }
        return hasher.getAsLong();
    }

    static long group(String algorithm, String spec) {
        Map<String, Long> hashes = new HashMap<>();
        if (!spec.isEmpty()) {
            for (String pair : spec.split(",")) {
                String[] kv = pair.split("=", 2);
                hashes.put(kv[0], Long.parseLong(kv[1]));
            }
        }
        if (algorithm.equals("xxh3")) return Utils.computeGroupHash(hashes);
        if (hashes.isEmpty()) return 0;
        List<String> names = new ArrayList<>(hashes.keySet());
        Collections.sort(names);
        HashStream64 hasher = Hashing.murmur3_128().hashStream();
        for (String name : names) hasher.putLong(hashes.get(name));
        return hasher.getAsLong();
    }
}
