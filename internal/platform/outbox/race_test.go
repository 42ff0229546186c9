//go:build race

package outbox_test

// raceEnabled reports a -race build: the transpiled SQLite driver runs many
// times slower under it.
const raceEnabled = true
