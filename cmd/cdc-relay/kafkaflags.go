package main

import (
	"errors"
	"flag"
	"log/slog"
	"strings"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/plugin/kslog"

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
}

func (p *producerFlags) register(fs *flag.FlagSet, dlqTopic *string) {
	fs.Var(&p.brokers, "brokers", "Kafka seed brokers, host:port, comma-separated")
	p.ksec.register(fs)
	fs.StringVar(dlqTopic, "dlq-topic", "cdc-relay.dlq", "dead-letter topic for rows that cannot be published and records Kafka rejects for good")
	fs.StringVar(&p.format, "format", sink.FormatOutbox, "record format: outbox (the record contract) or cloudevents (the contract plus the CloudEvents Kafka binding's binary-mode ce_* headers and content-type)")
	fs.StringVar(&p.ceSource, "ce-source", "", "ce_source of every event with --format cloudevents (default /cdc-relay/<database>/<schema.table>)")
}

// sink checks the group and puts it into cfg: the brokers, the record format, the security
// options and franz-go's log. It logs what the configuration exposes (warnInsecure).
func (p *producerFlags) sink(cfg *sink.Config, c *common, fs *flag.FlagSet, log *slog.Logger) error {
	if len(p.brokers) == 0 {
		return usageErr("--brokers is required (or set CDC_RELAY_BROKERS)")
	}
	ce, err := sink.NewCloudEvents(p.format, p.ceSource, &c.pg.Config)
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

// kafkaFlagNames puts the flags into sink.Security's errors.
var kafkaFlagNames = strings.NewReplacer("Security.TLS", "--kafka-tls", "Security.CAFile", "--kafka-ca-file",
	"Security.CertFile", "--kafka-cert-file", "Security.KeyFile", "--kafka-key-file",
	"Security.InsecureSkipVerify", "--kafka-tls-insecure-skip-verify", "Security.SASLMechanism", "--kafka-sasl-mechanism",
	"Security.User", "--kafka-user", "Security.Password", "--kafka-password-file (or --kafka-password)")

// kafkaLogger passes franz-go's warnings and errors (a broker that cannot be reached, a TLS
// handshake or SASL authentication that failed) to the relay's log, so that every retry
// says why; its informational messages only at --log-level debug, and never its debug ones.
// franz-go never logs credentials.
func kafkaLogger(log *slog.Logger) kgo.Opt {
	return kgo.WithLogger(kafkaLog{kslog.New(log.With("component", "kafka"))})
}

type kafkaLog struct{ *kslog.Logger }

func (l kafkaLog) Level() kgo.LogLevel {
	if l.Logger.Level() == kgo.LogLevelDebug {
		return kgo.LogLevelInfo
	}
	return kgo.LogLevelWarn
}
