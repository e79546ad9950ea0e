package main

import (
	"flag"
	"log/slog"
	"net"
	"net/url"
	"os"
	"strings"

	"github.com/jackc/pgx/v5/pgconn"
)

// pgTLS says how a PostgreSQL connection string protects the connection.
type pgTLS int

const (
	pgTLSNone       pgTLS = iota // sslmode=disable, or allow (plaintext first)
	pgTLSFallback                // sslmode=prefer (pgx's default): TLS unverified, plaintext if refused
	pgTLSUnverified              // sslmode=require: encrypted, but anyone in the path can pose as the server
	pgTLSVerified                // sslmode=verify-ca or verify-full
)

// pgTLSOf classifies a parsed connection configuration by its first attempt and fallbacks.
func pgTLSOf(cfg *pgconn.Config) pgTLS {
	classify := func(hasTLS, skip, custom bool) pgTLS {
		switch {
		case !hasTLS:
			return pgTLSNone
		case skip && !custom:
			return pgTLSUnverified
		}
		return pgTLSVerified
	}
	tc := cfg.TLSConfig
	got := pgTLSNone
	if tc != nil {
		got = classify(true, tc.InsecureSkipVerify, tc.VerifyPeerCertificate != nil || tc.VerifyConnection != nil)
	}
	for _, fb := range cfg.Fallbacks {
		if fb.TLSConfig == nil && got != pgTLSNone {
			return pgTLSFallback
		}
	}
	return got
}

// loopback reports whether host is a unix socket directory or a loopback name or address.
func loopback(host string) bool {
	if strings.HasPrefix(host, "/") || host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// urlHasPassword reports whether a URL or keyword/value connection string holds a password.
func urlHasPassword(s string) bool {
	if u, err := url.Parse(s); err == nil && (u.Scheme == "postgres" || u.Scheme == "postgresql") {
		_, ok := u.User.Password()
		return ok || u.Query().Get("password") != ""
	}
	for _, f := range strings.Fields(s) {
		if strings.HasPrefix(f, "password=") {
			return true
		}
	}
	return false
}

// warnInsecure logs, once at startup, each way the configuration exposes data or secrets:
// a PostgreSQL or Kafka connection to another host without verified TLS, a Kafka listener
// whose certificate is not verified, and a password on the command line (visible in process
// listings). It never logs a secret.
func warnInsecure(log *slog.Logger, fs *flag.FlagSet, c *common, brokers []string, k *kafkaSecurity) {
	if cfg := &c.pg.Config; !loopback(cfg.Host) {
		switch pgTLSOf(cfg) {
		case pgTLSNone, pgTLSFallback:
			log.Warn("the PostgreSQL connection may be unencrypted: use sslmode=verify-full with sslrootcert in --pg-url", "host", cfg.Host)
		case pgTLSUnverified:
			log.Warn("the PostgreSQL server's certificate is not verified (sslmode=require): use sslmode=verify-full with sslrootcert in --pg-url", "host", cfg.Host)
		}
	}
	remote := false
	for _, b := range brokers {
		if h, _, err := net.SplitHostPort(b); err != nil || !loopback(h) {
			remote = true
		}
	}
	tlsOn := k.tls || k.caFile != "" || k.certFile != "" || k.keyFile != "" || k.insecure
	switch {
	case k.insecure:
		log.Warn("the Kafka brokers' certificates are not verified (--kafka-tls-insecure-skip-verify): anyone in the path can read and change the traffic")
	case remote && !tlsOn:
		log.Warn("the Kafka connection is unencrypted: use --kafka-tls (and --kafka-ca-file)", "brokers", brokers)
	}
	// Set flags minus those whose environment twin is set: parse applies twins with Set.
	cmdline := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { cmdline[f.Name] = os.Getenv(envName(f.Name)) == "" })
	if cmdline["kafka-password"] {
		log.Warn("--kafka-password on the command line is visible in process listings: use --kafka-password-file or CDC_RELAY_KAFKA_PASSWORD")
	}
	if cmdline["pg-url"] && urlHasPassword(c.pgURL) {
		log.Warn("the password in --pg-url on the command line is visible in process listings: use --pg-password-file or CDC_RELAY_PG_URL")
	}
}
