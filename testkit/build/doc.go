// Package build compiles this module's cdc-relay binary for the tests and the benchmark, which
// run the real program as a child process.
//
// # Contexts and goroutines
//
// Relay runs `go build` as a child process on the caller's goroutine; cancelling its ctx kills the
// build. It starts no goroutines.
package build
