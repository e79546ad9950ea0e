// Package testenv connects integration tests to the real PostgreSQL and Kafka that
// scripts/dev-up.sh starts, and gives each test its own table, slot, publication and topic,
// removed when the test ends. Tests fail, never skip, when the services are not there: a
// green run must mean the real tests ran.
//
// Contexts and goroutines: helpers take the test, not a context, and bound their waits
// themselves; what they start (child processes and their waiters, consumers' poll loops,
// fake TLS listeners) is stopped and waited for in the test's cleanup.
package testenv
