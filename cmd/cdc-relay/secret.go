package main

import (
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/jackc/pgx/v5"
)

// secretValue is a flag.Value for a password given directly (--kafka-password or its
// environment twin). String never returns it, so neither --help nor anything that prints
// flag values can show it.
type secretValue struct{ v string }

func (s *secretValue) String() string {
	if s == nil || s.v == "" {
		return ""
	}
	return "(redacted)"
}

func (s *secretValue) Set(v string) error { s.v = v; return nil }

// Value returns the secret.
func (s *secretValue) Value() string { return s.v }

// readSecretFile reads a password from a file (a mounted secret, a 0600 file): its
// content without the trailing line break. Errors name the flag and the file, never the
// content.
func readSecretFile(flagName, path string) (string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		var pe *os.PathError
		if errors.As(err, &pe) {
			err = pe.Err // the path is in the message already
		}
		return "", fmt.Errorf("--%s %s: cannot read the password: %w", flagName, path, err)
	}
	s := strings.TrimRight(string(b), "\r\n")
	if s == "" {
		return "", fmt.Errorf("--%s %s: the file is empty", flagName, path)
	}
	if strings.ContainsAny(s, "\r\n") {
		return "", fmt.Errorf("--%s %s: the file has more than one line; it must hold only the password", flagName, path)
	}
	return s, nil
}

// loadPG parses --pg-url into c.pg, once for every connection: the password of
// --pg-password-file replaces the URL's (it is never put into a URL string, so nothing that
// prints the URL can show it), and --pg-timeout caps the URL's connect_timeout. Multi-host
// URLs keep their fallbacks (and target_session_attrs its check) in every copy.
func (c *common) loadPG() (err error) {
	c.pg, err = c.parsePG("pg-url", c.pgURL)
	return err
}

// at is c for another server (--primary-url, --standby-url): the same password and timeout.
func (c *common) at(flag, url string) (*common, error) {
	pg, err := c.parsePG(flag, url)
	if err != nil {
		return nil, &usageError{err}
	}
	o := *c
	o.pgURL, o.pg = url, pg
	return &o, nil
}

// parsePG parses url, the value of --flag, as loadPG does.
func (c *common) parsePG(flag, url string) (*pgx.ConnConfig, error) {
	if err := checkPGURLForm(flag, url); err != nil {
		return nil, err
	}
	cfg, err := pgx.ParseConfig(url)
	if err != nil {
		// pgconn's parse errors never include the password.
		if strings.Contains(url, "://") {
			return nil, fmt.Errorf("bad --%s: %w (use %s; %s)", flag, err, pgURLForms, pgPercentEncoding)
		}
		return nil, fmt.Errorf("bad --%s: %w (use %s)", flag, err, pgURLForms)
	}
	if err := checkPGHosts(flag, cfg); err != nil {
		return nil, err
	}
	if c.pgPasswordFile != "" {
		if cfg.Password, err = readSecretFile("pg-password-file", c.pgPasswordFile); err != nil {
			return nil, err
		}
	}
	if cfg.ConnectTimeout == 0 || cfg.ConnectTimeout > c.pgTimeout {
		cfg.ConnectTimeout = c.pgTimeout
	}
	return cfg, nil
}
