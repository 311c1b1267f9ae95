//go:build wasip1

// Command trap is a hostile fixture (Extism plugin): each export dies a
// different way in the middle of a call. warden must report WASM_TRAP, drop
// the instance, and go on serving.
//
//	call         panics (the Go runtime prints the panic and exits with 2)
//	unreachable  executes the wasm `unreachable` instruction (a real trap)
//	nilderef     dereferences a nil pointer
//	exit         calls os.Exit(3) (proc_exit) in the middle of a call
package main

import "os"

func main() {}

//go:wasmexport call
func call() int32 {
	panic("trap fixture: deliberate panic")
}

//go:wasmexport unreachable
func unreachableExport() int32 {
	unreachable()
	return 0
}

var nilPtr *int

//go:wasmexport nilderef
func nilderef() int32 {
	return int32(*nilPtr)
}

//go:wasmexport exit
func exit() int32 {
	os.Exit(3)
	return 0
}
