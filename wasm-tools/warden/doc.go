// Package warden is the guest-side helper for writing warden wasm tools in
// standard Go (GOOS=wasip1 GOARCH=wasm, go-pdk v1.1.3).
//
// It has two halves:
//
//   - Calling warden's core tools from inside a guest, through warden's host
//     function warden.warden_call (or its buffer path). Every such call goes
//     through warden's gate with the intersection of the run's grants and the
//     grants the owner gave this wasm tool, and is audited with the principal
//     chain run → wasm tool → core tool. See [Call] and the conveniences
//     [ReadFile], [WriteMemory], [QueryMemory] and [SystemInfo].
//
//   - Reading arguments and returning results from an Extism plugin export:
//     [Args] (strict decoding of the input), [Return] and [Fail].
//
// The ABI (fixed in wasm-tools/README.md, implemented by warden's hostfuncs
// package):
//
//	import "warden" "warden_call" (func (param i64) (result i64))
//
// The parameter is the offset of an Extism memory block holding the request
// JSON {"tool":"<name>","args":{...}}; the result is the offset of an Extism
// memory block holding the result envelope JSON of docs/envelope.md. The guest owns
// both blocks once the call returns and frees them. A result offset of 0
// means the host could not produce an envelope at all.
//
// [Call] sends through the buffer path when the host offers it (warden_buffer
// answers a buffer): the request and the envelope pass through one buffer
// — in the module's own memory when the host takes it (the direct mode: the
// request written there in place, one copy each way, made by the host),
// else in Extism memory, kept by the host for the export call and copied a
// word at a time — and the envelope comes back in a binary form read
// without scanning (binenv.go): no Extism kernel call and no JSON decoding
// on the way back, which in a Go guest cost more than the gate itself. The request is written without
// reflection for the argument types tools usually pass (fastwrite.go), and
// DecodeEnvelope reads the JSON envelope without it (fastread.go); both
// give exactly what encoding/json gives, and hand anything else to it.
//
// A tool failure (CAPABILITY_DENIED, NOT_FOUND, …) is a result, not a
// transport error: Call returns the envelope with Success false and a nil
// error. The conveniences turn such an envelope into an *Error.
//
// The real transport exists only when built for wasip1. On any other GOOS
// the package compiles against a stub whose transport always fails with
// [ErrNotWasm]; the stub exists only so that the JSON helpers can be unit
// tested natively.
package warden
