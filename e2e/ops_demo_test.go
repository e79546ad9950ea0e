package e2e

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/cdc-relay/cdc-relay/testkit/testenv"
)

// The seed's demo (seed 000) end to end, for the relay and for the polling publisher: COUNT
// orders, a publisher killed after Kafka acknowledged a batch, a normal publisher, and the
// inbox consumer. The script checks processed = unique + duplicates, unique = orders, and
// that the chaos run left duplicates; the test checks its closing line.
func TestSeedDemoAbsorbsDuplicates(t *testing.T) {
	for _, mode := range []string{"cdc", "poll"} {
		t.Run(mode, func(t *testing.T) {
			t.Parallel()
			name := testenv.Name(t)
			root := repoRoot(t)
			env := []string{"MODE=" + mode, "COUNT=20", "BATCH_SIZE=5", "SEED_SCHEMA=" + name, "SEED_TOPIC=" + name + ".orders",
				"SEED_SLOT=" + name, "SEED_GROUP=" + name, "SEED_BIN=" + t.TempDir()}
			cleanUpSeedDemo(t, root, name, name+".orders")
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
			defer cancel()
			cmd := exec.CommandContext(ctx, filepath.Join(root, "scripts", "seed-demo.sh"), "all")
			cmd.Dir = root
			cmd.Env = append(os.Environ(), env...)
			out, err := cmd.CombinedOutput()
			if err != nil {
				t.Fatalf("seed-demo.sh all (%s): %v\n%s", mode, err, out)
			}
			text := string(out)
			if !strings.Contains(text, "OK ("+mode+"): 20 orders") || !strings.Contains(text, "inserted=20") {
				t.Fatalf("unexpected output:\n%s", text)
			}
			for _, line := range strings.Split(text, "\n") {
				if strings.HasPrefix(line, "processed=") || strings.HasPrefix(line, "OK (") {
					t.Log(line)
				}
			}
		})
	}
}

// cleanUpSeedDemo removes, when the test ends, what scripts/seed-demo.sh made for a test whose
// SEED_SCHEMA, SEED_SLOT and SEED_GROUP are name and SEED_TOPIC topic: the slot (once inactive),
// the publication and schema, the topic and its dead-letter topic, the group, and the
// publisher's log under root/.dev.
func cleanUpSeedDemo(t *testing.T, root, name, topic string) {
	t.Helper()
	pool := testenv.Pool(t)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		_, _ = pool.Exec(ctx, `SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots WHERE slot_name = $1 AND NOT active`, name)
		_, _ = pool.Exec(ctx, `DROP PUBLICATION IF EXISTS `+pgx.Identifier{name}.Sanitize())
		_, _ = pool.Exec(ctx, `DROP SCHEMA IF EXISTS `+pgx.Identifier{name}.Sanitize()+` CASCADE`)
		adm := kadm.NewClient(testenv.Kafka(t))
		_, _ = adm.DeleteTopics(ctx, topic, topic+".dlq")
		_, _ = adm.DeleteGroups(ctx, name)
		_ = os.Remove(filepath.Join(root, ".dev", "seed-"+name+"-publisher.log"))
	})
}
