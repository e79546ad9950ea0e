package main

import (
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"math"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/plugin/kslog"

	"github.com/cdc-relay/cdc-relay/record"
	"github.com/cdc-relay/cdc-relay/sink"
)

// kafkaSecurity is the flag group for TLS and SASL to Kafka, shared by every command that
// produces (run, poll). Register it, parse, then call opts for the []kgo.Opt to put into
// sink.Config.Opts.
type kafkaSecurity struct {
	tls          bool
	caFile       string
	certFile     string
	keyFile      string
	insecure     bool
	mechanism    string
	user         string
	password     secretValue
	passwordFile string
}

func (k *kafkaSecurity) register(fs *flag.FlagSet) {
	fs.BoolVar(&k.tls, "kafka-tls", false, "connect to Kafka over TLS (implied by --kafka-ca-file and --kafka-cert-file); the broker's certificate and name are verified")
	fs.StringVar(&k.caFile, "kafka-ca-file", "", "PEM file of the CA(s) that sign the brokers' certificates (default: the system's roots)")
	fs.StringVar(&k.certFile, "kafka-cert-file", "", "PEM client certificate for mutual TLS (with --kafka-key-file)")
	fs.StringVar(&k.keyFile, "kafka-key-file", "", "PEM private key of --kafka-cert-file")
	fs.BoolVar(&k.insecure, "kafka-tls-insecure-skip-verify", false, "do NOT verify the brokers' certificates and names (testing only: anyone in the path can read and change the traffic)")
	fs.StringVar(&k.mechanism, "kafka-sasl-mechanism", "", "SASL mechanism: PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512 (default: no SASL)")
	fs.StringVar(&k.user, "kafka-user", "", "SASL user name")
	fs.Var(&k.password, "kafka-password", "SASL password (prefer --kafka-password-file or the environment twin: a flag is visible in process listings)")
	fs.StringVar(&k.passwordFile, "kafka-password-file", "", "file holding the SASL password")
}

// opts checks the group and returns the franz-go options for it (sink.Security), to put into
// sink.Config.Opts. The password file is read here, once. Errors are usage errors (exit 2)
// that name the flags, and never contain a password.
func (k *kafkaSecurity) opts() ([]kgo.Opt, error) {
	sec := sink.Security{TLS: k.tls, CAFile: k.caFile, CertFile: k.certFile, KeyFile: k.keyFile, InsecureSkipVerify: k.insecure,
		SASLMechanism: k.mechanism, User: k.user, Password: k.password.Value()}
	var errs []error
	switch {
	case sec.Password != "" && k.passwordFile != "":
		errs = append(errs, errors.New("--kafka-password and --kafka-password-file both given: use one"))
	case k.passwordFile != "":
		var err error
		if sec.Password, err = readSecretFile("kafka-password-file", k.passwordFile); err != nil {
			errs = append(errs, err)
		}
	}
	o, err := sec.Opts()
	var se *sink.SecurityError
	if errors.As(err, &se) {
		err = errors.New(kafkaFlagNames.Replace(se.Error()))
	}
	if err := errors.Join(append(errs, err)...); err != nil {
		return nil, &usageError{err}
	}
	return o, nil
}

// producerFlags are the flags of the commands that publish (run, poll, cutover): the brokers,
// their security, the dead-letter topic and the record format.
type producerFlags struct {
	brokers  listFlag
	ksec     kafkaSecurity
	format   string
	ceSource string
	dlqTopic *string
	// createTopics is --create-topics with --topic-partitions and --topic-replication-factor.
	createTopics      bool
	topicPartitions   int
	topicReplication  int
	fixedTopic, dlqIs string // for topicErr: --topic's value and the dead-letter topic's
}

func (p *producerFlags) register(fs *flag.FlagSet, dlqTopic *string) {
	p.dlqTopic = dlqTopic
	fs.Var(&p.brokers, "brokers", "Kafka seed brokers, host:port, comma-separated")
	p.ksec.register(fs)
	fs.StringVar(dlqTopic, "dlq-topic", "cdc-relay.dlq", "dead-letter topic for rows that cannot be published and records Kafka rejects for good; it must exist at start (or --create-topics)")
	fs.BoolVar(&p.createTopics, "create-topics", false, "create a topic that does not exist (the dead-letter topic at start, a row's topic before its first record) with --topic-partitions and --topic-replication-factor; without it a row for a missing topic is dead-lettered and a missing dead-letter topic stops the start")
	fs.IntVar(&p.topicPartitions, "topic-partitions", -1, "partitions of a topic --create-topics creates (-1: the broker's num.partitions)")
	fs.IntVar(&p.topicReplication, "topic-replication-factor", -1, "replication factor of a topic --create-topics creates (-1: the broker's default.replication.factor)")
	fs.StringVar(&p.format, "format", record.FormatOutbox, "record format: outbox (the record contract) or cloudevents (the contract plus the CloudEvents Kafka binding's binary-mode ce_* headers and content-type)")
	fs.StringVar(&p.ceSource, "ce-source", "", "ce_source of every event with --format cloudevents (default /cdc-relay/<database>/<schema.table>)")
}

// sink checks the group and puts it into cfg: the brokers, the topics that must exist at
// start (the dead-letter topic and fixedTopic, --topic, when set), topic creation, the record
// format, the security options and franz-go's log. It logs what the configuration exposes
// (warnInsecure).
func (p *producerFlags) sink(cfg *sink.Config, c *common, fs *flag.FlagSet, log *slog.Logger, fixedTopic string) error {
	if len(p.brokers) == 0 {
		return usageErr("--brokers is required (or set CDC_RELAY_BROKERS)")
	}
	errs := []error{checkBrokers(p.brokers), checkFixedTopicColumn(fs, fixedTopic), checkBufferedBytes(cfg.MaxBufferedBytes, memoryLimit())}
	if err := sink.ValidTopicName(*p.dlqTopic); err != nil {
		errs = append(errs, fmt.Errorf("--dlq-topic: %w", err))
	}
	if fixedTopic != "" {
		if err := sink.ValidTopicName(fixedTopic); err != nil {
			errs = append(errs, fmt.Errorf("--topic: %w", err))
		}
	}
	if p.topicPartitions == 0 || p.topicPartitions < -1 || p.topicPartitions > math.MaxInt32 {
		errs = append(errs, fmt.Errorf("--topic-partitions %d: use -1 (the broker's num.partitions) or a positive count", p.topicPartitions))
	}
	if p.topicReplication == 0 || p.topicReplication < -1 || p.topicReplication > math.MaxInt16 {
		errs = append(errs, fmt.Errorf("--topic-replication-factor %d: use -1 (the broker's default.replication.factor) or a positive count", p.topicReplication))
	}
	if !p.createTopics && (isSet(fs, "topic-partitions") || isSet(fs, "topic-replication-factor")) {
		errs = append(errs, errors.New("--topic-partitions and --topic-replication-factor apply to topics --create-topics creates: add --create-topics"))
	}
	if err := errors.Join(errs...); err != nil {
		return &usageError{err}
	}
	p.fixedTopic, p.dlqIs = fixedTopic, *p.dlqTopic
	cfg.Topics = append(cfg.Topics, *p.dlqTopic)
	if fixedTopic != "" && fixedTopic != *p.dlqTopic {
		cfg.Topics = append(cfg.Topics, fixedTopic)
	}
	if p.createTopics {
		cfg.CreateTopics = &sink.TopicCreation{Partitions: int32(p.topicPartitions), ReplicationFactor: int16(p.topicReplication)}
	}
	ce, err := record.NewCloudEvents(p.format, p.ceSource, &c.pg.Config)
	if err != nil {
		return &usageError{err}
	}
	kopts, err := p.ksec.opts()
	if err != nil {
		return err
	}
	cfg.Brokers, cfg.CloudEvents = p.brokers, ce
	cfg.Opts = append(append(cfg.Opts, kopts...), kafkaLogger(log))
	warnInsecure(log, fs, c, p.brokers, &p.ksec)
	return nil
}

// topicErr turns a topic that must exist at start and does not (sink.TopicMissingError from
// the startup check) into a usage error (exit 2) that names the flag and what to do.
func (p *producerFlags) topicErr(err error) error {
	var tm *sink.TopicMissingError
	if !errors.As(err, &tm) {
		return err
	}
	what := "the dead-letter topic (--dlq-topic)"
	if tm.Topic != p.dlqIs && tm.Topic == p.fixedTopic {
		what = "the topic of every record (--topic)"
	}
	if p.createTopics {
		return usageErr("%s %q does not exist in Kafka and --create-topics could not create it (the log says why: "+
			"the principal may lack CREATE on the cluster or topic, or the partitions or replication factor are refused): "+
			"create it (kafka-topics.sh --bootstrap-server %s --create --topic %s) (%w)",
			what, tm.Topic, strings.Join(p.brokers, ","), tm.Topic, err)
	}
	return usageErr("%s %q does not exist in Kafka: create it (kafka-topics.sh --bootstrap-server %s --create --topic %s), "+
		"or start with --create-topics (and --topic-partitions, --topic-replication-factor) to let the relay create missing topics (%w)",
		what, tm.Topic, strings.Join(p.brokers, ","), tm.Topic, err)
}

// isSet reports whether the flag was given on the command line or by its environment twin.
func isSet(fs *flag.FlagSet, name string) bool {
	set := false
	fs.Visit(func(f *flag.Flag) { set = set || f.Name == name })
	if _, ok := os.LookupEnv(envName(name)); ok {
		set = true
	}
	return set
}

// kafkaFlagNames puts the flags into sink.Security's errors.
var kafkaFlagNames = strings.NewReplacer("Security.TLS", "--kafka-tls", "Security.CAFile", "--kafka-ca-file",
	"Security.CertFile", "--kafka-cert-file", "Security.KeyFile", "--kafka-key-file",
	"Security.InsecureSkipVerify", "--kafka-tls-insecure-skip-verify", "Security.SASLMechanism", "--kafka-sasl-mechanism",
	"Security.User", "--kafka-user", "Security.Password", "--kafka-password-file (or --kafka-password)")

// kafkaLogger passes franz-go's warnings and errors (a broker that cannot be reached, a TLS
// handshake or SASL authentication that failed) to the relay's log, so that every retry
// says why; its informational messages only at --log-level debug, and never its debug ones.
// A warning or error repeated within kafkaRepeatWindow is logged once (franz-go retries an
// unreachable broker every 250 ms at start; the relay's own line says what it waits for),
// then again with how often it was repeated. franz-go never logs credentials.
func kafkaLogger(log *slog.Logger) kgo.Opt {
	return kgo.WithLogger(kafkaLog{kslog.New(log.With("component", "kafka")), &kafkaRepeats{seen: map[string]kafkaRepeat{}}, time.Now})
}

// kafkaRepeatWindow is how long a repeated franz-go warning stays quiet.
const kafkaRepeatWindow = time.Minute

type kafkaLog struct {
	*kslog.Logger
	repeats *kafkaRepeats
	now     func() time.Time
}

type kafkaRepeats struct {
	mu   sync.Mutex
	seen map[string]kafkaRepeat
}

type kafkaRepeat struct {
	at     time.Time // when it was last logged
	quiets int       // times it was not logged since
}

func (l kafkaLog) Level() kgo.LogLevel {
	if l.Logger.Level() == kgo.LogLevelDebug {
		return kgo.LogLevelInfo
	}
	return kgo.LogLevelWarn
}

func (l kafkaLog) Log(level kgo.LogLevel, msg string, keyvals ...any) {
	if level == kgo.LogLevelWarn || level == kgo.LogLevelError {
		key := fmt.Sprint(level, msg, keyvals)
		now := l.now()
		l.repeats.mu.Lock()
		r, ok := l.repeats.seen[key]
		if ok && now.Sub(r.at) < kafkaRepeatWindow {
			r.quiets++
			l.repeats.seen[key] = r
			l.repeats.mu.Unlock()
			return
		}
		if len(l.repeats.seen) > 1000 {
			clear(l.repeats.seen) // bounded: messages that name ever new brokers or partitions
		}
		l.repeats.seen[key] = kafkaRepeat{at: now}
		l.repeats.mu.Unlock()
		if r.quiets > 0 {
			keyvals = append(keyvals, "repeated_since_last_logged", r.quiets)
		}
	}
	l.Logger.Log(level, msg, keyvals...)
}
