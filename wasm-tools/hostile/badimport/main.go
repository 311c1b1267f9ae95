//go:build wasip1

// Command badimport is a hostile fixture (Extism plugin): it imports
// warden.nonexistent, a function the host does not provide. Instantiation
// must fail with a clear load error naming the import, and the failure must
// not take other tools down.
package main

func main() {}

//go:wasmimport warden nonexistent
func nonexistent(x uint64) uint64

//go:wasmexport call
func call() int32 {
	return int32(nonexistent(1))
}
