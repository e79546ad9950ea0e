package main

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"strings"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"
	"github.com/twmb/franz-go/plugin/kslog"
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

// SASL mechanisms, as Kafka names them.
const (
	saslPlain       = "PLAIN"
	saslScramSHA256 = "SCRAM-SHA-256"
	saslScramSHA512 = "SCRAM-SHA-512"
)

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

// opts checks the group and returns the franz-go options for it. Certificate, key and
// password files are read here, once. Errors are usage errors (exit 2) and never contain a
// password.
func (k *kafkaSecurity) opts() ([]kgo.Opt, error) {
	var errs []error
	var o []kgo.Opt
	tc, err := k.tlsConfig()
	if err != nil {
		errs = append(errs, err)
	} else if tc != nil {
		// franz-go sets ServerName to each broker's host when it dials, so names are verified.
		o = append(o, kgo.DialTLSConfig(tc))
	}
	mech, err := k.sasl(tc != nil)
	if err != nil {
		errs = append(errs, err)
	} else if mech != nil {
		o = append(o, kgo.SASL(mech))
	}
	if err := errors.Join(errs...); err != nil {
		return nil, &usageError{err}
	}
	return o, nil
}

// tlsConfig returns nil when TLS is off.
func (k *kafkaSecurity) tlsConfig() (*tls.Config, error) {
	if !k.tls && k.caFile == "" && k.certFile == "" && k.keyFile == "" && !k.insecure {
		return nil, nil
	}
	tc := &tls.Config{MinVersion: tls.VersionTLS12, InsecureSkipVerify: k.insecure}
	var errs []error
	if k.caFile != "" {
		pem, err := os.ReadFile(k.caFile)
		pool := x509.NewCertPool()
		switch {
		case err != nil:
			errs = append(errs, fmt.Errorf("--kafka-ca-file: %w", err))
		case !pool.AppendCertsFromPEM(pem):
			errs = append(errs, fmt.Errorf("--kafka-ca-file %s: no PEM certificate in it", k.caFile))
		default:
			tc.RootCAs = pool
		}
	}
	switch {
	case k.certFile != "" && k.keyFile != "":
		cert, err := tls.LoadX509KeyPair(k.certFile, k.keyFile)
		if err != nil {
			errs = append(errs, fmt.Errorf("--kafka-cert-file %s, --kafka-key-file %s: %w", k.certFile, k.keyFile, err))
		} else {
			tc.Certificates = []tls.Certificate{cert}
		}
	case k.certFile != "":
		errs = append(errs, errors.New("--kafka-cert-file needs --kafka-key-file"))
	case k.keyFile != "":
		errs = append(errs, errors.New("--kafka-key-file needs --kafka-cert-file"))
	}
	return tc, errors.Join(errs...)
}

// sasl returns nil when SASL is off.
func (k *kafkaSecurity) sasl(withTLS bool) (sasl.Mechanism, error) {
	mech := strings.ToUpper(strings.TrimSpace(k.mechanism))
	if mech == "" {
		if k.user != "" || k.password.Value() != "" || k.passwordFile != "" {
			return nil, errors.New("--kafka-user and --kafka-password(-file) need --kafka-sasl-mechanism (PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512)")
		}
		return nil, nil
	}
	var errs []error
	switch mech {
	case saslPlain, saslScramSHA256, saslScramSHA512:
	default:
		errs = append(errs, fmt.Errorf("--kafka-sasl-mechanism %q: use PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512", k.mechanism))
	}
	if mech == saslPlain && !withTLS {
		errs = append(errs, errors.New("--kafka-sasl-mechanism PLAIN sends the password as it is: it needs --kafka-tls"))
	}
	if k.user == "" {
		errs = append(errs, fmt.Errorf("--kafka-sasl-mechanism %s needs --kafka-user", mech))
	}
	pw := k.password.Value()
	switch {
	case pw != "" && k.passwordFile != "":
		errs = append(errs, errors.New("--kafka-password and --kafka-password-file both given: use one"))
	case k.passwordFile != "":
		var err error
		if pw, err = readSecretFile("kafka-password-file", k.passwordFile); err != nil {
			errs = append(errs, err)
		}
	case pw == "":
		errs = append(errs, fmt.Errorf("--kafka-sasl-mechanism %s needs --kafka-password-file (or --kafka-password)", mech))
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	switch mech {
	case saslPlain:
		return plain.Auth{User: k.user, Pass: pw}.AsMechanism(), nil
	case saslScramSHA256:
		return scram.Auth{User: k.user, Pass: pw}.AsSha256Mechanism(), nil
	default:
		return scram.Auth{User: k.user, Pass: pw}.AsSha512Mechanism(), nil
	}
}

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
