package schema

import (
	"crypto/tls"
	"errors"
	"fmt"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/sr"

	"github.com/cdc-relay/cdc-relay/internal/tlsfiles"
)

// Format is how a value is written.
type Format string

// The formats.
const (
	FormatAvro       Format = "avro"        // the JSON payload encoded as Avro binary
	FormatProtobuf   Format = "protobuf"    // the JSON payload (protojson) encoded as a Protobuf message
	FormatJSONSchema Format = "json-schema" // the JSON payload itself, validated against the JSON Schema
	FormatWire       Format = "wire"        // the payload is already in the wire format: checked, written as it is
)

// ParseFormat reads a format's name.
func ParseFormat(s string) (Format, error) {
	switch f := Format(strings.ToLower(strings.TrimSpace(s))); f {
	case FormatAvro, FormatProtobuf, FormatJSONSchema, FormatWire:
		return f, nil
	}
	return "", fmt.Errorf("schema format %q: use avro, protobuf, json-schema or wire", s)
}

func (f Format) srType() sr.SchemaType {
	switch f {
	case FormatProtobuf:
		return sr.TypeProtobuf
	case FormatJSONSchema:
		return sr.TypeJSON
	}
	return sr.TypeAvro
}

// Strategy names a value's subject.
type Strategy string

// The subject name strategies.
const (
	StrategyTopic  Strategy = "topic"  // <topic>-value (the default)
	StrategyRecord Strategy = "record" // the row's event type, as the record's full name
)

// ParseStrategy reads a strategy's name ("" is StrategyTopic).
func ParseStrategy(s string) (Strategy, error) {
	switch st := Strategy(strings.ToLower(strings.TrimSpace(s))); st {
	case "", StrategyTopic:
		return StrategyTopic, nil
	case StrategyRecord:
		return st, nil
	}
	return "", fmt.Errorf("subject strategy %q: use topic (<topic>-value) or record (the event type)", s)
}

// Config is how to reach the registry and what to write.
type Config struct {
	URLs []string // the registry's base URLs (for Apicurio, ending in /apis/ccompat/v7)

	User         string // basic auth user; "" for none
	PasswordFile string // basic auth password, read from this file (trailing newline dropped)

	CAFile             string // PEM CA(s) that sign the registry's certificate; "" for the system's
	CertFile, KeyFile  string // PEM client certificate and key, for mutual TLS
	InsecureSkipVerify bool   // do not verify the registry's certificate (testing only)

	Format   Format   // required
	Strategy Strategy // StrategyTopic when ""

	// Register, when set, registers Schemas[subject] (idempotent in the registry) the first time
	// a subject is met, instead of looking up its latest version. Off by default.
	Register bool
	Schemas  map[string]sr.Schema

	// ProtobufMessage is the message a Protobuf value is, by full name; "" for the event type's
	// under StrategyRecord when the file has it, else the file's first message.
	ProtobufMessage string

	Timeout time.Duration // per registry request; 10 s when 0
	MaxAge  time.Duration // a subject's latest version is looked up again after this; 5 min when 0
}

// Validate checks c without reading its files or calling the registry: a *ConfigError, or nil.
func (c Config) Validate() error {
	var errs []error
	if len(c.URLs) == 0 {
		errs = append(errs, errors.New("no registry URL"))
	}
	if _, err := ParseFormat(string(c.Format)); err != nil {
		errs = append(errs, err)
	}
	if _, err := ParseStrategy(string(c.Strategy)); err != nil {
		errs = append(errs, err)
	}
	switch {
	case c.User != "" && c.PasswordFile == "":
		errs = append(errs, errors.New("a registry user needs a password file"))
	case c.User == "" && c.PasswordFile != "":
		errs = append(errs, errors.New("a registry password file needs a user"))
	}
	if err := errors.Join(errs...); err != nil {
		return &ConfigError{Err: err}
	}
	return nil
}

// client checks c, reads its files and builds the registry client. Errors are a *ConfigError
// without the password.
func (c Config) client() (*sr.Client, error) {
	if err := c.Validate(); err != nil {
		return nil, err
	}
	var errs []error
	opts := []sr.ClientOpt{sr.URLs(c.URLs...), sr.UserAgent("cdc-relay")}
	if c.User != "" {
		pw, err := os.ReadFile(c.PasswordFile)
		if err != nil {
			errs = append(errs, fmt.Errorf("registry password file: %w", err))
		} else {
			opts = append(opts, sr.BasicAuth(c.User, strings.TrimRight(string(pw), "\r\n")))
		}
	}
	tc, err := c.tlsConfig()
	if err != nil {
		errs = append(errs, err)
	}
	timeout := c.Timeout
	if timeout <= 0 {
		timeout = 10 * time.Second
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.TLSClientConfig = tc
	opts = append(opts, sr.HTTPClient(&http.Client{Transport: tr, Timeout: timeout}))
	if err := errors.Join(errs...); err != nil {
		return nil, &ConfigError{Err: err}
	}
	cl, err := sr.NewClient(opts...)
	if err != nil {
		return nil, &ConfigError{Err: err}
	}
	return cl, nil
}

// tlsConfig returns nil for the system's defaults.
func (c Config) tlsConfig() (*tls.Config, error) {
	if c.CAFile == "" && c.CertFile == "" && c.KeyFile == "" && !c.InsecureSkipVerify {
		return nil, nil
	}
	return tlsfiles.Config(tlsfiles.Files{CA: c.CAFile, Cert: c.CertFile, Key: c.KeyFile}, c.InsecureSkipVerify, registryTLSWords)
}

// registryTLSWords name the registry's TLS files in its errors.
var registryTLSWords = tlsfiles.Words{CA: "registry CA file", Cert: "registry client certificate", Key: "key",
	CertWithoutKey: "a registry client certificate needs its key file",
	KeyWithoutCert: "a registry client key needs its certificate file"}
