package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
)

// runReport runs one of the subcommands that make a report (shapes, values, shards) once its
// flags are parsed: code is the parse's, -1 to go on, else the exit code returned at once. An
// interrupt cancels run's context; the report's Markdown, when there is one (also after a
// failure part-way), goes to stdout and where its files are to stderr. It returns the exit code.
func runReport[R interface {
	comparable
	Markdown() string
}](code int, name, outDir string, stdout, stderr io.Writer, run func(context.Context) (R, error)) int {
	if code >= 0 {
		return code
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	rep, err := run(ctx)
	var none R // no report: the run failed before it had one
	md := ""
	if rep != none {
		md = rep.Markdown()
	}
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
