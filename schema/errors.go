package schema

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	"github.com/twmb/franz-go/pkg/sr"

	"github.com/cdc-relay/cdc-relay/internal/tlshint"
)

// PayloadError is a payload that does not fit its subject's schema: a bad row, to dead-letter
// with these fields. Retrying it cannot succeed.
type PayloadError struct {
	Subject  string
	SchemaID int // 0 when the payload names no schema the registry knows (wire format)
	Format   Format
	Err      error // what does not fit
}

func (e *PayloadError) Error() string {
	switch {
	case e.Subject == "":
		return fmt.Sprintf("payload has no subject (%s): %v", e.Format, e.Err)
	case e.SchemaID == 0:
		return fmt.Sprintf("payload does not fit subject %s (%s): %v", e.Subject, e.Format, e.Err)
	}
	return fmt.Sprintf("payload does not fit subject %s, schema id %d (%s): %v", e.Subject, e.SchemaID, e.Format, e.Err)
}
func (e *PayloadError) Unwrap() error { return e.Err }

// UnavailableError is a registry that could not answer now (unreachable, timed out, 5xx, 429):
// a fault like a Kafka outage. Nothing about the payload is known; the same call may succeed later.
type UnavailableError struct {
	Subject string // "" when the call was for a schema id
	Err     error
}

func (e *UnavailableError) Error() string {
	return fmt.Sprintf("schema registry unavailable (subject %s): %v", e.Subject, e.Err)
}
func (e *UnavailableError) Unwrap() error { return e.Err }

// ConfigError is a registry set-up the same configuration meets again: credentials refused
// (401/403), a subject the registry does not know, a certificate not trusted, a registered schema
// this package cannot use. The operator must act (exit code 2 at start).
type ConfigError struct {
	Subject string
	Err     error
	Hint    string // what to check
}

func (e *ConfigError) Error() string {
	msg := "schema registry: " + e.Err.Error()
	if e.Subject != "" {
		msg = fmt.Sprintf("schema registry, subject %s: %v", e.Subject, e.Err)
	}
	if e.Hint != "" {
		msg += "; " + e.Hint
	}
	return msg
}
func (e *ConfigError) Unwrap() error { return e.Err }

// Retriable reports whether err is a registry fault that the same call may get past later
// (an *UnavailableError): pause and retry. A *PayloadError or *ConfigError never is.
func Retriable(err error) bool {
	var ue *UnavailableError
	return errors.As(err, &ue)
}

var tlsWords = tlshint.Words{Peer: "schema registry", CA: "the registry CA file",
	Name:   "registry URL: use a name the certificate lists, or fix the certificate",
	NotTLS: "this address answers plain HTTP: use an http:// URL or the registry's HTTPS port"}

// classify turns an error of a registry call into an *UnavailableError or a *ConfigError.
// A 404 is not classified here: whether it means an unknown subject (config) or an unknown
// schema id named by a payload (bad row) is the caller's to say.
func classify(subject string, err error) error {
	var re *sr.ResponseError
	if errors.As(err, &re) {
		switch {
		case re.StatusCode == http.StatusUnauthorized || re.StatusCode == http.StatusForbidden:
			return &ConfigError{Subject: subject, Err: err,
				Hint: fmt.Sprintf("the registry refused the credentials (HTTP %d): check the registry user and password file", re.StatusCode)}
		case re.StatusCode >= 500 || re.StatusCode == http.StatusTooManyRequests || re.StatusCode == http.StatusRequestTimeout:
			return &UnavailableError{Subject: subject, Err: err}
		default:
			return &ConfigError{Subject: subject, Err: err}
		}
	}
	if h := tlshint.Hint(err, tlsWords); h != "" {
		return &ConfigError{Subject: subject, Err: err, Hint: h}
	}
	if errors.Is(err, context.Canceled) {
		return err // the caller stopped: no verdict on the registry
	}
	// Unreachable, refused, reset, timed out, a name that does not resolve: the registry may come back.
	return &UnavailableError{Subject: subject, Err: err}
}

// notFound reports a registry 404 (subject, version or schema unknown).
func notFound(err error) bool {
	var re *sr.ResponseError
	return errors.As(err, &re) && re.StatusCode == http.StatusNotFound
}
