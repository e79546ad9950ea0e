package main

import (
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"
)

// pgURLForms says what --pg-url (and --primary-url, --standby-url) takes.
const pgURLForms = "a URL, postgres://USER@HOST:5432/DATABASE, or keyword/value settings, host=HOST user=USER dbname=DATABASE"

// pgPercentEncoding says how a user name or password goes into a URL.
const pgPercentEncoding = "a user name or password holding @ # : / ? or % must be percent-encoded in a URL " +
	"(@ is %40, # is %23, : is %3A, / is %2F, ? is %3F, % is %25), or give the password in --pg-password-file"

// checkPGURLForm refuses, before pgx reads it, a connection string that is neither
// PostgreSQL's URL nor keyword/value settings: a JDBC URL, another scheme, a host:port/db
// without a scheme (pgx would take it for keyword/value settings, or for none at all, and
// connect to the local socket as the OS user). Its errors never show a password.
func checkPGURLForm(flag, s string) error {
	if scheme, rest, ok := strings.Cut(s, "://"); ok {
		switch strings.ToLower(scheme) {
		case "postgres", "postgresql":
			return nil
		case "jdbc:postgresql":
			return fmt.Errorf("--%s is a JDBC URL: drop the jdbc: prefix (postgresql://%s), and give user and password in the URL's user part, "+
				"not as ?user=&password=", flag, redactUserinfo(rest))
		}
		return fmt.Errorf("--%s: the scheme %q is not PostgreSQL's: use %s", flag, scheme, pgURLForms)
	}
	if strings.TrimSpace(s) != "" && !strings.Contains(s, "=") {
		return fmt.Errorf("--%s %s is neither a URL nor keyword/value settings: add the scheme, postgres://USER@%s, or use %s",
			flag, redactUserinfo(s), strings.TrimPrefix(redactUserinfo(s), "USER@"), pgURLForms)
	}
	return nil
}

// checkPGHosts refuses a parsed URL whose host holds what no host name has: a user part that
// was not percent-encoded (postgres://u:pa@ss@host/db reads host "ss@host"). The host is not
// shown: it holds part of the password.
func checkPGHosts(flag string, cfg *pgx.ConnConfig) error {
	hosts := []string{cfg.Host}
	for _, fb := range cfg.Fallbacks {
		hosts = append(hosts, fb.Host)
	}
	for _, h := range hosts {
		if !strings.HasPrefix(h, "/") && strings.ContainsAny(h, "@#/?% ") {
			return fmt.Errorf("--%s: the host part holds @, #, /, ? or a space, which no host name has: %s", flag, pgPercentEncoding)
		}
	}
	return nil
}

// redactUserinfo replaces what precedes the last @ before the host (a user, maybe a password)
// with USER, so that a message may show the rest.
func redactUserinfo(s string) string {
	hostEnd := strings.IndexAny(s, "/?")
	if hostEnd < 0 {
		hostEnd = len(s)
	}
	if at := strings.LastIndex(s[:hostEnd], "@"); at >= 0 {
		return "USER@" + s[at+1:]
	}
	if at := strings.LastIndex(s, "@"); at >= 0 { // a password with / or ? before the @
		return "USER@" + s[at+1:]
	}
	return s
}
