package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
)

// runReport runs one of the subcommands that make a report (shapes, values, shards): an
// interrupt cancels run's context; the report's Markdown, when there is one (also after a
// failure part-way), goes to stdout and where its files are to stderr. It returns the exit code.
func runReport(name, outDir string, stdout, stderr io.Writer, run func(context.Context) (string, error)) int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	md, err := run(ctx)
	if md != "" {
		fmt.Fprint(stdout, md)
		fmt.Fprintf(stderr, "cdc-bench %s: results in %s\n", name, outDir)
	}
	if err != nil {
		fmt.Fprintf(stderr, "cdc-bench %s: %v\n", name, err)
		return 1
	}
	return 0
}
