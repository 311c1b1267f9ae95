// Command hostloop is a hostile fixture (Extism plugin): its export calls
// warden_call (system get_info) in an endless loop, so the guest spends its
// time in host code, where a guest deadline alone does not interrupt. warden
// must still end the call at its deadline with TIMEOUT, and each host call
// must carry its own deadline.
package main

import "github.com/wardenrt/warden/wasm-tools/warden"

func main() {}

var calls uint64

//go:wasmexport call
func call() int32 {
	for {
		_, _ = warden.Call("system", map[string]string{"operation": "get_info"})
		calls++
	}
}
