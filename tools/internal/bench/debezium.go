package bench

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/cdc-relay/cdc-relay/testkit/build"
)

// Debezium runs as Kafka Connect standalone (org.apache.kafka:connect-runtime 4.3.1, the Kafka
// version Debezium 3.6.1 is built against) with io.debezium:debezium-connector-postgres
// 3.6.1.Final and its outbox EventRouter, the jars that scripts/debezium-jars.sh fetches with
// Maven into .dev/debezium. Each debezium publisher has one worker JVM for the whole run
// (started by its first phase, killed and restarted by the replay phase); each phase adds its
// own connector (own slot, publication and topic) over the worker's REST API and deletes it
// at the end, as a Connect cluster is used.

// The record contract as far as EventRouter allows: topic from the row's topic column, key =
// aggregate_id, value = payload (String converters: jsonb arrives as its JSON text), the outbox
// id as the outbox-id header and created_at as cdc-commit-time (EventRouter has no commit time;
// for a single-row transaction created_at is its start, which is what poll stamps too).
const (
	connectorClass = "io.debezium.connector.postgresql.PostgresConnector"
	stringConv     = "org.apache.kafka.connect.storage.StringConverter"
)

// DebeziumTuned are the settings of the `debezium-tuned` publisher, each a change from the
// shipped default (worker.* are Kafka Connect worker settings, the rest the connector's):
//
//   - poll.interval.ms=10 (500): Debezium's streaming queue hands a batch to Connect when it
//     holds max.batch.size (2048) events or after poll.interval.ms, so at a few thousand rows/s
//     every event waits for the interval;
//   - worker.producer.linger.ms=0 (5 in Kafka 4 clients): send at once, as cdc-relay does;
//   - worker.offset.flush.interval.ms=1000 (60000): Debezium confirms a position to the slot only
//     after Connect has stored its offset, so this bounds what a kill -9 replays.
var DebeziumTuned = []string{"poll.interval.ms=10", "worker.producer.linger.ms=0", "worker.offset.flush.interval.ms=1000"}

// jvmOpts are those of Kafka's connect-standalone.sh and kafka-run-class.sh (heap and GC).
var jvmOpts = []string{"-Xms256M", "-Xmx2G", "-XX:+UseG1GC", "-XX:MaxGCPauseMillis=20",
	"-XX:InitiatingHeapOccupancyPercent=35", "-XX:+ExplicitGCInvokesConcurrent", "-Djava.awt.headless=true",
	"-Dorg.slf4j.simpleLogger.showDateTime=true"}

// prepareDebezium finds the Connect worker and Debezium jars (cfg.DebeziumHome, else
// scripts/debezium-jars.sh of the repository, which fetches them) for the debezium publishers
// of cfg. When it cannot (no JVM, no Maven, Maven failing) it returns cfg without them and says
// why: the bench carries on without those rows.
func prepareDebezium(ctx context.Context, cfg Config) (Config, []string) {
	if !slices.ContainsFunc(cfg.Publishers, func(p Publisher) bool { return p.Debezium }) {
		return cfg, nil
	}
	reason := ""
	if _, err := exec.LookPath("java"); err != nil {
		reason = "java not found: Debezium (Kafka Connect) needs Java 17 (apt-get install openjdk-17-jre-headless)"
	} else if cfg.DebeziumHome == "" {
		home, err := debeziumJars(ctx, cfg.Progress)
		if err != nil {
			reason = err.Error()
		}
		cfg.DebeziumHome = home
	}
	if reason == "" {
		if _, err := os.Stat(filepath.Join(cfg.DebeziumHome, "plugins", "debezium-postgres")); err != nil {
			reason = fmt.Sprintf("no Debezium plugin in %s: %v (rerun scripts/debezium-jars.sh)", cfg.DebeziumHome, err)
		}
	}
	if reason == "" {
		return cfg, nil
	}
	var kept []Publisher
	var left []string
	for _, p := range cfg.Publishers {
		if p.Debezium {
			left = append(left, fmt.Sprintf("%s: %s", p.Name, reason))
		} else {
			kept = append(kept, p)
		}
	}
	cfg.Publishers = kept
	for _, l := range left {
		fmt.Fprintf(cfg.Progress, "cdc-bench: leaving out %s\n", l)
	}
	return cfg, left
}

// debeziumJars runs scripts/debezium-jars.sh and returns the directory it prints.
func debeziumJars(ctx context.Context, progress io.Writer) (string, error) {
	root, err := build.ModuleRoot()
	if err != nil {
		return "", fmt.Errorf("cannot find scripts/debezium-jars.sh: %w (or give --debezium-home)", err)
	}
	if _, err := exec.LookPath("mvn"); err != nil {
		return "", errors.New("mvn not found: Maven fetches Kafka Connect and Debezium from Maven Central (apt-get install maven, or give --debezium-home)")
	}
	fmt.Fprintf(progress, "cdc-bench: fetching Kafka Connect and Debezium (scripts/debezium-jars.sh)\n")
	cmd := exec.CommandContext(ctx, filepath.Join(root, "scripts", "debezium-jars.sh"))
	cmd.Stderr = progress
	out, err := cmd.Output()
	if err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) && ee.ExitCode() == 3 {
			return "", errors.New("java or mvn not found (see the line above)")
		}
		return "", fmt.Errorf("scripts/debezium-jars.sh failed: %w", err)
	}
	return strings.TrimSpace(string(out)), nil
}

// connectWorker is one debezium publisher's Kafka Connect standalone JVM.
type connectWorker struct {
	pub      Publisher
	p        *proc
	rest     string // http://127.0.0.1:<port>
	props    string // worker.properties
	offsets  string // Connect's offset file: what a restarted worker resumes from
	starts   int
	paused   bool                         // SIGSTOPped while other publishers are measured (env.pauseWorkers)
	conns    map[string]map[string]string // connectors added, to add again after a restart
	http     *http.Client
	progress func(string, ...any)
}

// worker returns pub's running worker, starting it if there is none.
func (e *env) worker(ctx context.Context, pub Publisher) (*connectWorker, error) {
	e.mu.Lock()
	w := e.workers[pub.Name]
	e.mu.Unlock()
	if w != nil && !w.p.Exited() {
		w.resume()
		return w, nil
	}
	if w == nil {
		dir := filepath.Join(e.logDir, "connect-"+slug(pub.Name))
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return nil, err
		}
		w = &connectWorker{pub: pub, props: filepath.Join(dir, "worker.properties"), offsets: filepath.Join(dir, "offsets.dat"),
			conns: map[string]map[string]string{}, http: &http.Client{Timeout: 30 * time.Second}, progress: e.progress}
		e.mu.Lock()
		e.workers[pub.Name] = w
		e.mu.Unlock()
		// Stopped by env.close, before the cleanups: a phase's cleanup must not stop it.
	}
	if err := w.start(ctx, e.cfg); err != nil {
		return nil, err
	}
	return w, nil
}

// start writes worker.properties (a fresh REST port each time) and starts the JVM, waiting
// until its REST API answers. Connectors it ran before are not added again: see restart.
func (w *connectWorker) start(ctx context.Context, cfg Config) error {
	port, err := freePort()
	if err != nil {
		return err
	}
	props := map[string]string{
		"bootstrap.servers":            strings.Join(cfg.Brokers, ","),
		"key.converter":                stringConv,
		"value.converter":              stringConv,
		"offset.storage.file.filename": w.offsets,
		"plugin.path":                  filepath.Join(cfg.DebeziumHome, "plugins"),
		"listeners":                    fmt.Sprintf("http://127.0.0.1:%d", port),
	}
	for _, a := range w.pub.Args {
		if k, v, ok := strings.Cut(a, "="); ok && strings.HasPrefix(k, "worker.") {
			props[strings.TrimPrefix(k, "worker.")] = v
		}
	}
	if err := os.WriteFile(w.props, []byte(properties(props)), 0o644); err != nil {
		return err
	}
	w.rest = fmt.Sprintf("http://127.0.0.1:%d", port)
	w.starts++
	args := append(slices.Clone(jvmOpts), "-cp", filepath.Join(cfg.DebeziumHome, "lib", "*"),
		"org.apache.kafka.connect.cli.ConnectStandalone", w.props)
	w.progress("%s: starting Kafka Connect (REST %s)", w.pub.Name, w.rest)
	logPath := filepath.Join(filepath.Dir(w.props), fmt.Sprintf("connect-%d.log", w.starts))
	if w.p, err = startProc(w.pub.Name, logPath, w.pub.Env, "java", args...); err != nil {
		return err
	}
	return waitUntil(ctx, 5*time.Minute, w.p, w.pub.Name+"'s Kafka Connect REST API", func() (bool, error) {
		resp, err := w.http.Get(w.rest + "/connectors")
		if err != nil {
			return false, nil
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK, nil
	})
}

// freePort asks the kernel for a free loopback port.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// properties renders a Java properties file, sorted.
func properties(m map[string]string) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	var b strings.Builder
	for _, k := range keys {
		fmt.Fprintf(&b, "%s=%s\n", k, m[k])
	}
	return b.String()
}

// connectorConfig is the connector of one phase: slot and publication (filtered: only the
// fixture's outbox) of its own, routed by the topic column, or all to topic when set.
func connectorConfig(pgURL string, pub Publisher, f *fixture, slot, topic string) (map[string]string, error) {
	route := "${routedByValue}"
	if topic != "" {
		route = topic
	}
	return debeziumConnector(pgURL, map[string]string{
		"topic.prefix":                                        slot,
		"slot.name":                                           slot,
		"publication.name":                                    f.base,
		"publication.autocreate.mode":                         "filtered",
		"table.include.list":                                  f.outbox,
		"transforms.outbox.table.field.event.id":              "id",
		"transforms.outbox.table.field.event.key":             "aggregate_id",
		"transforms.outbox.table.field.event.payload":         "payload",
		"transforms.outbox.route.by.field":                    "topic",
		"transforms.outbox.route.topic.replacement":           route,
		"transforms.outbox.table.fields.additional.placement": "id:header:outbox-id,created_at:header:cdc-commit-time",
	}, pub.Args)
}

// debeziumConnector is a Debezium PostgreSQL connector on pgURL's database, one task,
// streaming with pgoutput from the slot's position (no snapshot) through the outbox
// EventRouter, with the settings of c (its slot, publication, table and the EventRouter's
// own), then the key=value settings of extra (worker.* are the worker's: left out).
func debeziumConnector(pgURL string, c map[string]string, extra []string) (map[string]string, error) {
	pc, err := pgconn.ParseConfig(pgURL)
	if err != nil {
		return nil, fmt.Errorf("bench: bad PostgreSQL URL: %w", err)
	}
	sslmode := "prefer"
	if u, err := parseSSLMode(pgURL); err == nil && u != "" {
		sslmode = u
	}
	for k, v := range map[string]string{
		"connector.class":   connectorClass,
		"tasks.max":         "1",
		"database.hostname": pc.Host,
		"database.port":     strconv.Itoa(int(pc.Port)),
		"database.user":     pc.User,
		"database.password": pc.Password,
		"database.dbname":   pc.Database,
		// Debezium defaults to prefer: against a server with ssl=on it would use TLS where
		// cdc-relay, given the same URL, does not.
		"database.sslmode":       sslmode,
		"plugin.name":            "pgoutput",
		"snapshot.mode":          "no_data",
		"transforms":             "outbox",
		"transforms.outbox.type": "io.debezium.transforms.outbox.EventRouter",
	} {
		c[k] = v
	}
	for _, a := range extra {
		k, v, ok := strings.Cut(a, "=")
		if ok && !strings.HasPrefix(k, "worker.") {
			c[k] = v
		}
	}
	return c, nil
}

// parseSSLMode returns the sslmode of a connection string, URL or keyword form ("" if none).
func parseSSLMode(pgURL string) (string, error) {
	if strings.HasPrefix(pgURL, "postgres://") || strings.HasPrefix(pgURL, "postgresql://") {
		u, err := url.Parse(pgURL)
		if err != nil {
			return "", err
		}
		return u.Query().Get("sslmode"), nil
	}
	for _, kv := range strings.Fields(pgURL) {
		if k, v, _ := strings.Cut(kv, "="); k == "sslmode" {
			return strings.Trim(v, "'"), nil
		}
	}
	return "", nil
}

// add creates a connector and remembers it for restart.
func (w *connectWorker) add(ctx context.Context, name string, cfg map[string]string) error {
	w.conns[name] = cfg
	return w.post(ctx, name, cfg)
}

func (w *connectWorker) post(ctx context.Context, name string, cfg map[string]string) error {
	body, _ := json.Marshal(map[string]any{"name": name, "config": cfg})
	if err := restCall(ctx, w.http, http.MethodPost, w.rest+"/connectors", "application/json", body); err != nil {
		return fmt.Errorf("bench: %s: add connector %s: %w", w.pub.Name, name, err)
	}
	return nil
}

// remove deletes a connector (its task stops and commits its offsets; the slot stays, and
// the phase's cleanup drops it).
func (w *connectWorker) remove(name string) {
	delete(w.conns, name)
	if w.p == nil || w.p.Exited() {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	_ = restCall(ctx, w.http, http.MethodDelete, w.rest+"/connectors/"+name, "", nil)
	// The slot is dropped at cleanup, which waits while a walsender holds it.
}

// failedTask returns an error when the connector's task has FAILED (with Connect's trace).
func (w *connectWorker) failedTask(ctx context.Context, name string) error {
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, w.rest+"/connectors/"+name+"/status", nil)
	resp, err := w.http.Do(req)
	if err != nil {
		return nil
	}
	defer resp.Body.Close()
	var st struct {
		Connector struct {
			State string `json:"state"`
			Trace string `json:"trace"`
		} `json:"connector"`
		Tasks []struct {
			State string `json:"state"`
			Trace string `json:"trace"`
		} `json:"tasks"`
	}
	if json.NewDecoder(resp.Body).Decode(&st) != nil {
		return nil
	}
	if st.Connector.State == "FAILED" {
		return fmt.Errorf("bench: %s: connector %s failed: %s (log %s)", w.pub.Name, name, firstLines(st.Connector.Trace, 5), w.p.log.Name())
	}
	for _, t := range st.Tasks {
		if t.State == "FAILED" {
			return fmt.Errorf("bench: %s: connector %s's task failed: %s (log %s)", w.pub.Name, name, firstLines(t.Trace, 5), w.p.log.Name())
		}
	}
	return nil
}

func firstLines(s string, n int) string {
	lines := strings.Split(s, "\n")
	return strings.Join(lines[:min(n, len(lines))], "\n")
}

// kill sends SIGKILL to the JVM and waits for it to be gone.
func (w *connectWorker) kill() {
	if w.p != nil && !w.p.Exited() {
		w.p.Kill()
	}
}

// restart starts the JVM again on the same offset file and adds the connectors it ran: they
// resume from the offsets Connect had stored (else from their slot's confirmed position).
func (w *connectWorker) restart(ctx context.Context, cfg Config) error {
	if err := w.start(ctx, cfg); err != nil {
		return err
	}
	for name, c := range w.conns {
		if err := w.post(ctx, name, c); err != nil {
			return err
		}
	}
	return nil
}

// stop ends the JVM with SIGTERM (Connect stops its connectors and commits their offsets).
func (w *connectWorker) stop() {
	if w.p != nil {
		w.resume()
		_ = w.p.stop(60 * time.Second)
	}
}

// pause stops the JVM with SIGSTOP, so that the phases of other publishers never share the
// machine with it: a worker whose connector was deleted measured idle (0.01 s of CPU in the
// ~25 s of run's steady phase after a kill -9 phase), but a JIT compilation or a GC cycle
// that a phase's load left behind would otherwise land on the next publisher's figures. It
// holds no connector then, hence no replication connection.
func (w *connectWorker) pause() {
	if w.p != nil && !w.p.Exited() && !w.paused {
		w.p.Send(syscall.SIGSTOP)
		w.paused = true
	}
}

// resume continues a paused JVM.
func (w *connectWorker) resume() {
	if w.p != nil && w.paused {
		if !w.p.Exited() {
			w.p.Send(syscall.SIGCONT)
		}
		w.paused = false
	}
}

// pauseWorkers pauses every Kafka Connect worker but pub's (all of them when pub is not a
// debezium publisher), so that a phase measures its publisher alone.
func (e *env) pauseWorkers(pub Publisher) {
	e.mu.Lock()
	defer e.mu.Unlock()
	for name, w := range e.workers {
		if !pub.Debezium || name != pub.Name {
			w.pause()
		}
	}
}

// cpu is the JVM's utime+stime so far (0 once it has exited).
func (w *connectWorker) cpu() time.Duration {
	st, err := readProcStat(w.p.PID())
	if err != nil {
		return 0
	}
	return st.cpu
}
