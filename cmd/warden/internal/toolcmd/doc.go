// Package toolcmd holds the tool commands: `warden tools` (list),
// `warden call` (one call through the gate) and `warden tool` (the
// owner's management of wasm modules).
package toolcmd
