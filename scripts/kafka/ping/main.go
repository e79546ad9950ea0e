// Command ping tells whether a Kafka broker serves requests: it exits 0 once the broker at its
// argument (host:port) answered an ApiVersions request, 1 if it did not within -timeout, and 2
// on bad usage. scripts/lib/kafka.sh builds it once into .dev/bin/kafka-ping and calls it while the
// broker starts; it prints nothing on success (a failure's reason goes to stderr with -v).
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

func main() {
	timeout := flag.Duration("timeout", 5*time.Second, "how long to wait for the answer")
	verbose := flag.Bool("v", false, "say why on stderr when the broker does not answer")
	flag.Usage = func() {
		fmt.Fprintln(flag.CommandLine.Output(), "usage: kafka-ping [-timeout 5s] [-v] host:port")
		flag.PrintDefaults()
	}
	flag.Parse()
	if flag.NArg() != 1 {
		flag.Usage()
		os.Exit(2)
	}
	if err := ping(flag.Arg(0), *timeout); err != nil {
		if *verbose {
			fmt.Fprintf(os.Stderr, "kafka-ping: %s: %v\n", flag.Arg(0), err)
		}
		os.Exit(1)
	}
}

// ping sends one ApiVersions request (kgo's Ping) to broker, with no retry: the caller loops.
func ping(broker string, timeout time.Duration) error {
	cl, err := kgo.NewClient(kgo.SeedBrokers(broker), kgo.DialTimeout(timeout), kgo.RequestRetries(0))
	if err != nil {
		return err
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	return cl.Ping(ctx)
}
