package main

import (
	"flag"
	"regexp"
	"strings"

	"github.com/jackc/pglogrepl"
)

// stopAtFlag is run's --stop-at-lsn: the relay publishes every transaction whose commit LSN is
// below it, none at or after it, and exits 0 once the stream passed it and everything before
// is acknowledged and confirmed (relay.Config.StopAt). The old generation of a reshard drains
// with it up to the new slots' start (docs/shards.md).
type stopAtFlag struct {
	raw string
	lsn pglogrepl.LSN
}

func (s *stopAtFlag) register(fs *flag.FlagSet) {
	fs.StringVar(&s.raw, "stop-at-lsn", "", "publish every transaction committed before this LSN (X/Y, as `slot reshard` prints it), none after, and exit 0 once it is passed and confirmed (the old shards of a reshard drain with it)")
}

// lsnText is PostgreSQL's text form of an LSN (ParseLSN alone takes trailing garbage).
var lsnText = regexp.MustCompile(`^[0-9A-Fa-f]{1,8}/[0-9A-Fa-f]{1,8}$`)

// parse checks the value before any connection: a bad one is a usage error (exit 2).
func (s *stopAtFlag) parse() error {
	if strings.TrimSpace(s.raw) == "" {
		return nil
	}
	v := strings.TrimSpace(s.raw)
	lsn, err := pglogrepl.ParseLSN(v)
	if err != nil || lsn == 0 || !lsnText.MatchString(v) {
		return usageErr("--stop-at-lsn %q: want a WAL position X/Y in hexadecimal above 0/0, e.g. 0/1A2B3C4D, as `slot reshard` prints it", s.raw)
	}
	s.lsn = lsn
	return nil
}
