// Package cetest reads franz-go records with the CloudEvents Go SDK, for the tests of
// --format cloudevents (sink's unit tests and the end-to-end tests). It is test support only:
// nothing in the relay imports it.
//
// # Contexts and goroutines
//
// Pure conversions; no I/O, no goroutines; the SDK methods' ctx arguments are ignored.
package cetest
