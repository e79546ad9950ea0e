//go:build race

package replication

// poisonReleased: in the race build (the tests' build, CI's), a payload buffer given back is
// overwritten with garbage, so that a payload released while something still reads it (a
// record Kafka has not taken) arrives as garbage and the test that reads it fails.
const poisonReleased = true
