// Command recursion is a hostile fixture (Extism plugin): its export
// recurses without bound, each frame holding a buffer. The goroutine stack
// lives in linear memory, so the module dies on the memory limit or on Go's
// stack limit; warden must report WASM_TRAP or WASM_LIMIT and go on serving.
package main

func main() {}

var sink byte

//go:noinline
func deeper(n int) byte {
	var frame [256]byte
	frame[n%len(frame)] = byte(n)
	return deeper(n+1) + frame[(n*7)%len(frame)]
}

//go:wasmexport call
func call() int32 {
	sink = deeper(0)
	return int32(sink)
}
