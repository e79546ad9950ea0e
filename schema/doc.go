// Package schema turns a row's JSON payload into a schema registry's wire-format value: magic
// byte 0, the schema id (4 bytes, big-endian), for Protobuf the message indexes, then the value
// in Avro, Protobuf or JSON (validated by JSON Schema); or checks a payload already in that
// format. The registry is any with the Confluent API (franz-go's pkg/sr is the client).
//
// # Subjects and caching
//
// A value's subject is <topic>-value, or the row's event type under StrategyRecord. Each subject's
// latest schema is looked up once (or registered, only when Config.Register is set) and cached;
// after Config.MaxAge it is looked up again, and the cached one is kept if that fails. A schema
// id met in a wire-format payload is looked up once; an unknown one is asked again after 30 s.
// So a run of records costs one registry request a subject, not one a record.
//
// # Errors
//
// Encode's errors are one of three kinds, for the caller to act on:
//   - *PayloadError: the payload does not fit (subject, schema id, what does not fit). A bad row:
//     dead-letter it; retrying cannot help.
//   - *UnavailableError: the registry is unreachable, timed out or answered 5xx/429. A fault
//     (Retriable): pause and retry; nothing about the row is known.
//   - *ConfigError: refused credentials (401/403), an unknown subject, an untrusted certificate,
//     a registered schema of another format or with references. Stop (exit code 2 at start).
//
// # Context and credentials
//
// Encode and Check send requests only on a cache miss, bound by ctx and Config.Timeout. The basic
// auth password is read from a file at New and never appears in an error; TLS takes a CA file
// and an optional client certificate, like the relay's Kafka settings.
package schema
