// Package env is the environment every warden command is built on, from
// the global flags: the home and workspace, the store (bbolt, or a fleet's
// PostgreSQL store and what it publishes), the policy in force, the
// registry of core and wasm tools, the gate, the audit of management
// changes, and the failures that carry a code, an exit status and a hint.
// It is the one place that wires store, runtime and builtin together.
package env
