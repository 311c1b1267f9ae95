// Command wasiprobe is a hostile fixture (Extism plugin, export "call"): it
// tries to read files, list directories, read the environment and the
// arguments, reach the network, write to stdout and stderr, and reads the
// clock and crypto/rand twice; its output is the probe.Report as JSON. A host
// test asserts "could" is empty, the stdout/stderr markers never reach the
// terminal, and the clock and randomness are real (and the random bytes
// differ between instances).
package main

import (
	"github.com/wardenrt/warden/wasm-tools/hostile/internal/probe"
	"github.com/wardenrt/warden/wasm-tools/warden"
)

func main() {}

//go:wasmexport call
func call() int32 {
	return warden.Return(probe.Run())
}
