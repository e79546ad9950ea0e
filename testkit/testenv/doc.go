// Package testenv connects integration tests to the real PostgreSQL and Kafka that
// scripts/dev-up.sh starts, and gives each test its own table, slot, publication and topic,
// removed when the test ends. Every entry point goes through one gate, Require: without the
// services a test fails under CI=true or CDC_RELAY_REQUIRE_SERVICES=1 (make test sets it, so a
// green run means the real tests ran) and skips with a one-line reason otherwise (so plain
// `go test ./...` runs every test that needs no service).
//
// # Contexts and goroutines
//
// Helpers take the test, not a context, and bound their waits themselves; what they start (child
// processes and their waiters, consumers' poll loops, writers' loops, throwaway PostgreSQL
// servers, fake TLS listeners) is stopped and waited for in the test's cleanup. The delivery
// contract's verdict is testkit/oracle's (Writer.Verify).
package testenv
