// Package hostfuncs is the guest-facing ABI of warden: what a wasm tool can
// reach outside its sandbox. Each piece is a thin adapter onto the gate in
// package gate, so a guest reaches core tools only through the same
// decoding, policy, capability, approval and audit steps as every other
// caller, acting with the run's grants ∩ the tool's grants (gate.Guest)
// and recorded with the principal chain run → wasm:<tool> → core tool.
//
// There are two ways out of a guest, both here:
//
//   - warden_call, in the "warden" host module ([Functions]): a JSON
//     request {"tool","args"} in an Extism memory block, the result
//     envelope (docs/envelope.md) in a new block. See wasm-tools/README.md,
//     "The ABI". Its buffer path (warden_buffer, warden_call_buffer) makes
//     the same call through one buffer the host keeps per export call
//     ([WithExchange]) — or, in its direct mode, a region of the guest's
//     own memory the guest registers for the call — and answers with the
//     envelope in a binary form.
//   - Extism's own http_request, which sends through http.DefaultClient
//     with the guest call's context. [InstallHTTP] puts a [Transport] under
//     http.DefaultClient that turns every request made in a guest's context
//     into a call of the core http tool (grants checked on the URL, on
//     every redirect hop and on every address connected to; audited).
//
// Both find the guest in the call's context (gate.GuestFrom), which the
// wasm tool sets with gate.WithGuest before it calls into the module. A
// core call made for a guest runs with a context in which no guest is set
// any more, so the core tool acts as itself (under the guest's grants),
// never as the guest again.
package hostfuncs

// ModuleName is the wasm import module that holds warden's host functions.
const ModuleName = "warden"
