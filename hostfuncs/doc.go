// Package hostfuncs is the guest-facing ABI of warden: the host functions a
// wasm tool imports from the "warden" host module. Each is a thin adapter
// onto the gate in package runtime, so a guest reaches core tools only
// through the same decoding, policy, capability, approval and audit steps as
// every other caller. The functions arrive with wasm tool support; this
// package fixes the module name guests import.
package hostfuncs

// ModuleName is the wasm import module that holds warden's host functions.
const ModuleName = "warden"
