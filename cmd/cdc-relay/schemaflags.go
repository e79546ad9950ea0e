package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"strings"

	"github.com/twmb/franz-go/pkg/sr"

	"github.com/cdc-relay/cdc-relay/record"
	"github.com/cdc-relay/cdc-relay/schema"
	"github.com/cdc-relay/cdc-relay/sink"
)

// valueFormatJSON is --value-format's default: the payload as it is, no registry.
const valueFormatJSON = "json"

// schemaFlags is the --value-format group of the commands that publish (run, poll): a schema
// registry's wire format for every value (docs/schema-registry.md).
type schemaFlags struct {
	format          string
	urls            listFlag
	user            string
	passwordFile    string
	caFile          string
	certFile        string
	keyFile         string
	insecure        bool
	strategy        string
	registerSchemas bool
	schemaFiles     listFlag
	protobufMessage string
}

// registryFlags are the group's flags that need a registry format.
var registryFlags = []string{"registry-url", "registry-user", "registry-password-file", "registry-ca-file", "registry-cert-file",
	"registry-key-file", "registry-tls-insecure-skip-verify", "subject-strategy", "register-schemas", "schema-file", "protobuf-message"}

func (s *schemaFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&s.format, "value-format", valueFormatJSON, "record value: json (the payload as it is, no registry), or a schema registry's wire format: "+
		"avro, protobuf or json-schema (the JSON payload encoded or validated with the subject's latest schema), or wire (the payload already is one: its schema id is checked)")
	fs.Var(&s.urls, "registry-url", "schema registry base URL(s), comma-separated, with the Confluent API (Apicurio: .../apis/ccompat/v7); required by a registry --value-format")
	fs.StringVar(&s.user, "registry-user", "", "schema registry basic auth user (with --registry-password-file)")
	fs.StringVar(&s.passwordFile, "registry-password-file", "", "file holding the schema registry basic auth password")
	fs.StringVar(&s.caFile, "registry-ca-file", "", "PEM file of the CA(s) that sign the registry's certificate (default: the system's roots)")
	fs.StringVar(&s.certFile, "registry-cert-file", "", "PEM client certificate for mutual TLS to the registry (with --registry-key-file)")
	fs.StringVar(&s.keyFile, "registry-key-file", "", "PEM private key of --registry-cert-file")
	fs.BoolVar(&s.insecure, "registry-tls-insecure-skip-verify", false, "do NOT verify the registry's certificate (testing only)")
	fs.StringVar(&s.strategy, "subject-strategy", string(schema.StrategyTopic), "a value's subject: topic (<topic>-value) or record (the row's event type)")
	fs.BoolVar(&s.registerSchemas, "register-schemas", false, "register each --schema-file schema under its subject the first time it is met, instead of only looking up the subject's latest schema")
	fs.Var(&s.schemaFiles, "schema-file", "SUBJECT=FILE, comma-separated: the schema to register for SUBJECT with --register-schemas")
	fs.StringVar(&s.protobufMessage, "protobuf-message", "", "with --value-format protobuf: the message a value is, by full name (default: the event type's under --subject-strategy record, else the file's first)")
}

// encoder checks the group and returns the encoder, or nil for json. ceFormat is --format: the
// CloudEvents binding says the value is JSON, so it takes json only. Errors are usage errors
// (exit 2) that name the flags.
func (s *schemaFlags) encoder(fs *flag.FlagSet, ceFormat string) (*schema.Encoder, error) {
	if strings.EqualFold(strings.TrimSpace(s.format), valueFormatJSON) {
		// Only flags set on the command line are refused: an environment that serves several
		// commands (a deployment's, a CI's) may name a registry for the ones that use it. fs.Visit
		// sees the twins too (parse applies them with fs.Set): a flag whose value is its twin's
		// came from the environment.
		var set []string
		fs.Visit(func(f *flag.Flag) {
			env, ok := os.LookupEnv(envName(f.Name))
			fromEnv := ok && f.Value.String() == strings.TrimSpace(env)
			if slices.Contains(registryFlags, f.Name) && !fromEnv {
				set = append(set, "--"+f.Name)
			}
		})
		if len(set) > 0 {
			return nil, usageErr("%s given with --value-format json, which writes the payload as it is and uses no registry: "+
				"set --value-format avro, protobuf, json-schema or wire, or drop them", strings.Join(set, ", "))
		}
		return nil, nil
	}
	format, err := schema.ParseFormat(s.format)
	if err != nil {
		return nil, usageErr("--value-format %q: use json (the default), avro, protobuf, json-schema or wire", s.format)
	}
	var errs []error
	if len(s.urls) == 0 {
		errs = append(errs, fmt.Errorf("--value-format %s needs --registry-url (or CDC_RELAY_REGISTRY_URL): the schema registry to look the subjects up in", format))
	}
	if ceFormat == record.FormatCloudEvents {
		errs = append(errs, fmt.Errorf("--format cloudevents with --value-format %s: the CloudEvents binding says the value is JSON; use --value-format json or --format outbox", format))
	}
	strategy, err := schema.ParseStrategy(s.strategy)
	if err != nil {
		errs = append(errs, fmt.Errorf("--subject-strategy: %w", err))
	}
	if s.protobufMessage != "" && format != schema.FormatProtobuf {
		errs = append(errs, fmt.Errorf("--protobuf-message is for --value-format protobuf, not %s", format))
	}
	schemas := map[string]sr.Schema{}
	for _, sf := range s.schemaFiles {
		subject, path, ok := strings.Cut(sf, "=")
		if !ok || subject == "" || path == "" {
			errs = append(errs, fmt.Errorf("--schema-file %q: use SUBJECT=FILE", sf))
			continue
		}
		text, err := os.ReadFile(path)
		if err != nil {
			errs = append(errs, fmt.Errorf("--schema-file %s: %w", sf, err))
			continue
		}
		schemas[subject] = sr.Schema{Schema: string(text), Type: map[schema.Format]sr.SchemaType{
			schema.FormatAvro: sr.TypeAvro, schema.FormatProtobuf: sr.TypeProtobuf, schema.FormatJSONSchema: sr.TypeJSON}[format]}
	}
	switch {
	case s.registerSchemas && len(s.schemaFiles) == 0:
		errs = append(errs, errors.New("--register-schemas needs --schema-file SUBJECT=FILE: the schemas to register"))
	case !s.registerSchemas && len(s.schemaFiles) > 0:
		errs = append(errs, errors.New("--schema-file is only read with --register-schemas (off by default: the relay only looks subjects up)"))
	case s.registerSchemas && format == schema.FormatWire:
		errs = append(errs, errors.New("--register-schemas with --value-format wire: wire values carry their schema id already; nothing is registered"))
	}
	if err := errors.Join(errs...); err != nil {
		return nil, &usageError{err}
	}
	enc, err := schema.New(schema.Config{URLs: s.urls, User: s.user, PasswordFile: s.passwordFile,
		CAFile: s.caFile, CertFile: s.certFile, KeyFile: s.keyFile, InsecureSkipVerify: s.insecure,
		Format: format, Strategy: strategy, Register: s.registerSchemas, Schemas: schemas, ProtobufMessage: s.protobufMessage})
	if err != nil {
		return nil, &usageError{err}
	}
	return enc, nil
}

// check looks up at start the subjects that are knowable (the one of a fixed --topic under the
// topic strategy), or else asks the registry to answer with these credentials. A
// *schema.ConfigError (refused credentials, an unknown subject, an untrusted certificate) is a
// usage error (exit 2) with its text. A registry that does not answer is logged, not waited
// for: publishing pauses at the first record until it answers.
func (s *schemaFlags) check(ctx context.Context, enc *schema.Encoder, fixedTopic string, log *slog.Logger) error {
	if enc == nil {
		return nil
	}
	var subjects []string
	if fixedTopic != "" && enc.Subject(fixedTopic, "x") != "x" {
		subjects = append(subjects, enc.Subject(fixedTopic, ""))
	}
	err := enc.Check(ctx, subjects...)
	switch {
	case err == nil:
		log.Info("schema registry answers", "value_format", s.format, "subjects", subjects)
		return nil
	case ctx.Err() != nil:
		return nil // stopped during startup: the command's next step sees it and stops cleanly
	case !errors.As(err, new(*schema.ConfigError)) && schema.Retriable(err):
		log.Warn("schema registry unavailable at start: publishing pauses at the first record until it answers", "cause", err)
		return nil
	}
	return &usageError{err}
}

// valueFlags is how run and poll write values: --value-format and its registry, and
// --compression.
type valueFlags struct {
	schema      schemaFlags
	compression compressionFlag
}

func (v *valueFlags) register(fs *flag.FlagSet) {
	v.schema.register(fs)
	v.compression.register(fs)
}

// apply checks the group, puts the compression into cfg and returns the encoder (nil for
// --value-format json). ceFormat is --format.
func (v *valueFlags) apply(fs *flag.FlagSet, ceFormat string, cfg *sink.Config) (*schema.Encoder, error) {
	opts, err := v.compression.opts()
	enc, serr := v.schema.encoder(fs, ceFormat)
	if err != nil || serr != nil {
		var msgs []error
		for _, e := range []error{err, serr} {
			var ue *usageError
			if errors.As(e, &ue) {
				msgs = append(msgs, ue.err)
			}
		}
		return nil, &usageError{errors.Join(msgs...)}
	}
	cfg.Opts = append(cfg.Opts, opts...)
	return enc, nil
}

// schemaStopErr makes a run or poll that stopped on a registry configuration finding (refused
// credentials, a subject the registry does not know) exit 2, like the same finding at start.
func schemaStopErr(err error) error {
	if err != nil && errors.As(err, new(*schema.ConfigError)) && !errors.As(err, new(*usageError)) {
		return &usageError{err}
	}
	return err
}
