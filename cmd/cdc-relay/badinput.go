package main

import (
	"bufio"
	"errors"
	"flag"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
	"unicode"
)

// checkBrokers refuses a --brokers entry that is no host:port: a listener's name or a scheme
// copied from server.properties (PLAINTEXT://host:9092), which franz-go would look up as a
// host name for ever, or a port that is not a number.
func checkBrokers(brokers []string) error {
	var errs []error
	for _, b := range brokers {
		if scheme, rest, ok := strings.Cut(b, "://"); ok {
			errs = append(errs, fmt.Errorf("--brokers %s: a broker is host:port, without the listener's name or scheme %s://: use %s",
				b, scheme, rest))
			continue
		}
		host, port, err := net.SplitHostPort(b)
		if err != nil {
			if strings.Count(b, ":") == 0 {
				continue // a host alone: franz-go adds Kafka's port, 9092
			}
			errs = append(errs, fmt.Errorf("--brokers %s: want host:port, e.g. kafka-1:9092 or [::1]:9092", b))
			continue
		}
		if p, err := strconv.Atoi(port); err != nil || p < 1 || p > 65535 || host == "" {
			errs = append(errs, fmt.Errorf("--brokers %s: want host:port with a port of 1 to 65535, e.g. kafka-1:9092", b))
		}
	}
	return errors.Join(errs...)
}

// checkFixedTopicColumn refuses --column-topic given with --topic: every event goes to
// --topic, and the column would be ignored without a word.
func checkFixedTopicColumn(fs *flag.FlagSet, fixedTopic string) error {
	if fixedTopic != "" && isSet(fs, "column-topic") {
		return fmt.Errorf("--column-topic %s and --topic %s: with --topic every event goes to %s and the topic column is not read: "+
			"give one of them", fs.Lookup("column-topic").Value, fixedTopic, fixedTopic)
	}
	return nil
}

// checkTransactionalID refuses a --transactional-id with spaces or control characters:
// Kafka takes it as it is, and an id with a trailing space is another id than the one the
// next relay of the slot is given, so neither fences the other.
func checkTransactionalID(id string) error {
	if i := strings.IndexFunc(id, func(r rune) bool { return unicode.IsSpace(r) || unicode.IsControl(r) }); i >= 0 {
		return fmt.Errorf("--transactional-id %q holds a space or control character (at byte %d): "+
			"use letters, digits, '.', '_' and '-', e.g. %s", id, i, strings.Join(strings.Fields(id), "-"))
	}
	return nil
}

// memoryLimit returns the memory this process may use: the cgroup's limit when one is set,
// else the machine's (MemTotal); 0 when neither can be read.
func memoryLimit() int64 {
	if b, err := os.ReadFile("/sys/fs/cgroup/memory.max"); err == nil {
		if v, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64); err == nil && v > 0 {
			return v
		}
	}
	f, err := os.Open("/proc/meminfo")
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if kb, ok := strings.CutPrefix(sc.Text(), "MemTotal:"); ok {
			v, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(kb), "kB")), 10, 64)
			if err == nil {
				return v << 10
			}
		}
	}
	return 0
}

// checkBufferedBytes refuses a --max-buffered-bytes above the memory the process may use
// (limit, 0: unknown): reading would pause only when the process runs out of memory.
func checkBufferedBytes(n int, limit int64) error {
	if limit > 0 && int64(n) > limit {
		return fmt.Errorf("--max-buffered-bytes %d (%s) is more than this process may use (%s, the machine's or the container's memory): "+
			"the producer would run out of memory before reading pauses; use a fraction of it (the default is 33554432, 32 MiB)",
			n, byteSize(int64(n)), byteSize(limit))
	}
	return nil
}

func byteSize(n int64) string {
	const unit = 1 << 10
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	v, i := float64(n), -1
	for v >= unit && i < 4 {
		v /= unit
		i++
	}
	return fmt.Sprintf("%.1f %ciB", v, "KMGTP"[i])
}

// checkMetricsAddr refuses a --metrics-addr that is no host:port (empty disables it).
func checkMetricsAddr(addr string) error {
	if addr == "" {
		return nil
	}
	_, port, err := net.SplitHostPort(addr)
	if p, perr := strconv.Atoi(port); err != nil || perr != nil || p < 0 || p > 65535 {
		return fmt.Errorf("--metrics-addr %q: want host:port, e.g. 127.0.0.1:9188 or :9188 (port 0 picks one; empty disables)", addr)
	}
	return nil
}
