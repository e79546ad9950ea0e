// A consumer's read of one Confluent wire-format Avro value with Apache Avro's Java library (the
// reference implementation): the schema by the value's id from the registry, then the datum.
// Run by schema's integration tests as a single-file program:
//   java -cp '<jars>/*' AvroRead.java <registry URL> <value in hex> [<value in hex> ...]
// Prints each record as JSON (GenericData's form) on stdout, one line a value, in order.
import com.fasterxml.jackson.databind.ObjectMapper;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.ByteBuffer;
import java.util.HexFormat;
import org.apache.avro.Schema;
import org.apache.avro.generic.GenericData;
import org.apache.avro.generic.GenericDatumReader;
import org.apache.avro.io.BinaryDecoder;
import org.apache.avro.io.DecoderFactory;

public class AvroRead {
	public static void main(String[] args) throws Exception {
		for (int a = 1; a < args.length; a++) {
			byte[] value = HexFormat.of().parseHex(args[a]);
			if (value.length < 5 || value[0] != 0) {
				throw new IllegalArgumentException("not the wire format: magic byte " + value[0]);
			}
			int id = ByteBuffer.wrap(value, 1, 4).getInt();
			HttpResponse<String> resp = HttpClient.newHttpClient().send(
					HttpRequest.newBuilder(URI.create(args[0] + "/schemas/ids/" + id)).build(),
					HttpResponse.BodyHandlers.ofString());
			if (resp.statusCode() != 200) {
				throw new IllegalStateException("schema " + id + ": HTTP " + resp.statusCode() + " " + resp.body());
			}
			Schema schema = new Schema.Parser().parse(new ObjectMapper().readTree(resp.body()).get("schema").asText());
			BinaryDecoder in = DecoderFactory.get().binaryDecoder(value, 5, value.length - 5, null);
			Object datum = new GenericDatumReader<Object>(schema).read(null, in);
			if (!in.isEnd()) {
				throw new IllegalStateException("bytes left after the datum");
			}
			System.out.println(GenericData.get().toString(datum));
		}
	}
}
