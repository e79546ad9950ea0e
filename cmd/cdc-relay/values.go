package main

import (
	"errors"
	"flag"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
)

// durationForms is what every duration flag takes, said in its parse error.
const durationForms = "a number with a unit: 500ms, 10s, 2m, 1h30m, or days: 7d, 1d12h"

// parseDuration reads a duration as time.ParseDuration does, and days too ("7d", "1d12h"),
// as dead-letters --since does: every duration flag takes the same units. A number without
// a unit is refused with the forms, never read as nanoseconds.
func parseDuration(s string) (time.Duration, error) {
	in := strings.TrimSpace(s)
	if in == "" {
		return 0, fmt.Errorf("an empty duration: use %s", durationForms)
	}
	neg := strings.HasPrefix(in, "-")
	rest := strings.TrimPrefix(in, "-")
	var days time.Duration
	if n, after, ok := strings.Cut(rest, "d"); ok {
		k, err := strconv.ParseUint(n, 10, 16)
		if err != nil || n == "" {
			return 0, fmt.Errorf("%q is not a duration: use %s", s, durationForms)
		}
		days, rest = time.Duration(k)*24*time.Hour, after
	}
	d := days
	if rest != "" || days == 0 {
		if rest == "" {
			rest = "0s"
		}
		if _, err := strconv.ParseFloat(rest, 64); err == nil && rest != "0" {
			return 0, fmt.Errorf("%q has no unit: use %s (e.g. %ss)", s, durationForms, rest)
		}
		p, err := time.ParseDuration(rest)
		if err != nil || (days > 0 && strings.HasPrefix(rest, "-")) {
			return 0, fmt.Errorf("%q is not a duration: use %s", s, durationForms)
		}
		d += p
	}
	if neg {
		d = -d
	}
	return d, nil
}

// checkedValue wraps a flag's value so that a value that does not parse is refused with the
// form expected (the flag package's own error says only "parse error"), and so that a duration
// takes days. The flag package puts the flag's name and the value in front.
type checkedValue struct {
	flag.Getter
	def string
}

func (v *checkedValue) IsBoolFlag() bool {
	b, ok := v.Getter.(interface{ IsBoolFlag() bool })
	return ok && b.IsBoolFlag()
}

func (v *checkedValue) Set(s string) error {
	switch v.Get().(type) {
	case time.Duration:
		d, err := parseDuration(s)
		if err != nil {
			return err
		}
		return v.Getter.Set(d.String())
	case bool:
		if v.Getter.Set(s) != nil {
			return fmt.Errorf("%q: use true or false", s)
		}
	case int, int64:
		if err := v.Getter.Set(s); err != nil {
			max := int64(math.MaxInt)
			if _, ok := v.Get().(int64); ok {
				max = math.MaxInt64
			}
			if errors.Is(err, strconv.ErrRange) {
				return fmt.Errorf("%q is out of range: at most %d", s, max)
			}
			return fmt.Errorf("%q is not a whole number: write it out in digits, e.g. %s", s, v.def)
		}
	default:
		return v.Getter.Set(s)
	}
	return nil
}

// checkValues wraps each flag of fs whose value is a duration, a number or a bool in a
// checkedValue, once.
func checkValues(fs *flag.FlagSet) {
	fs.VisitAll(func(f *flag.Flag) {
		g, ok := f.Value.(flag.Getter)
		if _, done := f.Value.(*checkedValue); !ok || done || f.Name == helpAllFlag {
			return
		}
		switch g.Get().(type) {
		case time.Duration, bool, int, int64:
			f.Value = &checkedValue{Getter: g, def: f.DefValue}
		}
	})
}
