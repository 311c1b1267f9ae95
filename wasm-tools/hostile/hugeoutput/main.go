// Command hugeoutput is a hostile fixture (Extism plugin): its export
// "call" sets 64 MiB of output (override with config "bytes"), and its
// export "stdout" writes the same amount to WASI stdout. warden must cap
// both: the output with WASM_LIMIT (or TOO_LARGE) at the tool's
// max_output_bytes, stdout at its log capture limit, never the terminal.
package main

import (
	"bytes"
	"os"
	"strconv"

	"github.com/wardenrt/warden/wasm-tools/warden"
)

func main() {}

const defaultSize = 64 << 20

func size() int {
	if s, ok := warden.Config("bytes"); ok {
		if n, err := strconv.Atoi(s); err == nil && n >= 0 {
			return n
		}
	}
	return defaultSize
}

//go:wasmexport call
func call() int32 {
	return warden.Return(bytes.Repeat([]byte{'A'}, size()))
}

//go:wasmexport stdout
func stdout() int32 {
	line := bytes.Repeat([]byte{'B'}, 64<<10)
	for n := size(); n > 0; n -= len(line) {
		if _, err := os.Stdout.Write(line[:min(n, len(line))]); err != nil {
			return warden.Fail(err)
		}
	}
	return warden.Return("wrote to stdout")
}
