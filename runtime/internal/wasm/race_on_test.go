//go:build race

package wasm

// raceEnabled: the race detector slows instantiation several-fold, so
// deadline slack figures are only asserted without it.
const raceEnabled = true
