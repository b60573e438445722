//go:build race

package txstate

// raceEnabled reports a -race build, where allocation counts are not exact.
const raceEnabled = true
