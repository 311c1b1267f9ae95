package gate

import "strings"

// Conceals reports whether the gate's redactor hides secret wherever it
// appears in what the gate records and returns (arguments, outputs,
// errors, audit records): a tool handing a secret to a guest checks this
// first, so a guest that echoes the secret cannot put it on record.
func (g *Gate) Conceals(secret string) bool {
	return secret != "" && !strings.Contains(g.o.Redactor.String("<"+secret+">"), secret)
}

// Redact masks what the gate's redactor masks in s: for text a tool logs
// by itself (a wasm guest's captured output), which the gate never sees.
func (g *Gate) Redact(s string) string { return g.o.Redactor.String(s) }

// HoldsSecret reports whether the gate's redactor would mask something in
// s: for bytes a tool hands out in a form the redactor cannot read (fs_read's
// base64), which must not carry a secret past the masking.
func (g *Gate) HoldsSecret(s string) bool { return g.o.Redactor.Contains(s) }
