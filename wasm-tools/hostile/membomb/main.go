// Command membomb is a hostile fixture (Extism plugin): its export
// allocates (and touches) memory until the module dies. warden must stop it
// at the tool's memory limit (WASM_LIMIT, or WASM_TRAP when the Go runtime
// aborts on a failed memory.grow) without the host growing with it.
package main

func main() {}

// keep holds every chunk so none can be collected.
var keep [][]byte

//go:wasmexport call
func call() int32 {
	for {
		b := make([]byte, 1<<20)
		for i := 0; i < len(b); i += 4096 {
			b[i] = byte(i)
		}
		keep = append(keep, b)
	}
}
