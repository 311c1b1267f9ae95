// Command hostloop is a hostile fixture (Extism plugin): its export calls
// warden_call (system get_info) in an endless loop, so the guest spends its
// time in host code, where a guest deadline alone does not interrupt. warden
// must still end the call at its deadline with TIMEOUT, and each host call
// must carry its own deadline. Its export times makes the same call as many
// times as its input says ({"n": N}; none: once) and outputs the
// last envelope as the guest helper decoded it (JSON), for the host's tests
// and benchmarks of the helper.
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

//go:wasmexport times
func times() int32 {
	var in struct {
		N int `json:"n"`
	}
	if err := warden.Args(&in); err != nil {
		return warden.Fail(err)
	}
	var e warden.Envelope
	for range max(in.N, 1) {
		var err error
		if e, err = warden.Call("system", map[string]string{"operation": "get_info"}); err != nil {
			return warden.Fail(err)
		}
	}
	return warden.Return(e)
}
