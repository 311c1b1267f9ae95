// Command loop is a hostile fixture (Extism plugin): its export never
// returns. warden must stop it at the call's deadline with TIMEOUT
// (wazero's WithCloseOnContextDone), drop the instance, and go on serving.
package main

func main() {}

// counter is global so the loop cannot be optimised away.
var counter uint64

//go:wasmexport call
func call() int32 {
	for {
		counter++
	}
}
