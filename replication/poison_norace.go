//go:build !race

package replication

// poisonReleased: see poison_race.go.
const poisonReleased = false
