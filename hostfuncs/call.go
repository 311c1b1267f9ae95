package hostfuncs

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"strings"
	"unicode/utf8"

	extism "github.com/extism/go-sdk"

	"github.com/wardenrt/warden/runtime/gate"
	"github.com/wardenrt/warden/runtime/tool"
)

// maxRequestBytes caps a warden_call request block: the gate's own cap on
// arguments (tool.MaxArgsBytes) plus room for the tool name and the
// request's braces. A larger block is refused without being read.
const maxRequestBytes = tool.MaxArgsBytes + 4<<10

// maxEchoBytes caps how much of a malformed request is kept in the text the
// gate records for it.
const maxEchoBytes = 1 << 10

// requestHint is the hint of every malformed-request refusal.
const requestHint = `send {"tool":"<core tool>","args":{…}}: exactly these two fields, tool a string, args a JSON object`

// Functions returns warden's host functions for guests: warden_call in
// module "warden" (ModuleName), (i64) → i64 as wasm-tools/README.md fixes
// it.
//
// warden_call reads the request block at its parameter, makes the call
// through the gate of the gate.Guest in the call's context
// (Guest.Call: run ∩ tool grants, principal chain, core tools only, the
// host call's own deadline) and returns the offset of a new block holding
// the JSON envelope (tool.Result). The guest owns both blocks; the input
// block is never freed here.
//
// It never traps on guest input. A malformed request (not JSON, not one
// object, a field other than tool and args, a duplicated field, tool not a
// string, a missing field, invalid UTF-8) still goes through the gate, so
// the attempt is audited: under the tool name that could be read (or "")
// with arguments that cannot be valid — a JSON string describing the
// problem and quoting the request's start — so the gate refuses it with
// INVALID_INPUT (or UNKNOWN_TOOL when the name is unknown or unreadable,
// OPERATION_NOT_SUPPORTED for a wasm tool) and the envelope's message
// names the problem.
// args that are not an object are passed as they are and refused by the
// gate's strict decoding, like duplicate keys inside args.
//
// Envelopes made here, without the gate (nothing is audited; no tool ran):
//   - a request block over 1 MiB + 4 KiB: WASM_LIMIT, not read;
//   - no gate.Guest in the context (the module runs outside a wasm tool
//     call): INTERNAL;
//   - the gate could not record the call (audit log failure): INTERNAL;
//   - the envelope does not fit in the guest's memory: WASM_LIMIT, when that
//     short envelope fits.
//
// It returns 0 only when there is no envelope at all: a parameter that is
// not a live memory block (0, out of range, freed), or no memory left for
// even a short envelope.
//
// warden_buffer and warden_call_buffer (buffer.go) are the same call with
// the request and the envelope in one buffer the host keeps for the export
// call: fewer Extism kernel calls, whole words copied. The guest helper of
// wasm-tools uses them when the context has an exchange (WithExchange) and
// warden_call otherwise; modules built with other PDKs keep warden_call.
func Functions() []extism.HostFunction {
	f := extism.NewHostFunctionWithStack("warden_call",
		func(ctx context.Context, p *extism.CurrentPlugin, stack []uint64) {
			stack[0] = wardenCall(ctx, p, stack[0])
		},
		[]extism.ValueType{extism.ValueTypeI64}, []extism.ValueType{extism.ValueTypeI64})
	f.SetNamespace(ModuleName)
	return append([]extism.HostFunction{f}, bufferFunctions()...)
}

// wardenCall is warden_call: the request block at in → the envelope block's
// offset, or 0.
func wardenCall(ctx context.Context, p *extism.CurrentPlugin, in uint64) (out uint64) {
	defer func() {
		// Belt and braces: nothing below should panic, and a host panic
		// would trap the guest. No envelope, then.
		if recover() != nil {
			out = 0
		}
	}()
	raw, size, ok := readRequest(p, in)
	if !ok {
		return 0
	}
	res := handle(ctx, raw, size)
	return writeEnvelope(p, res)
}

// handle turns one request into its envelope. raw is nil when the block
// (size bytes) was too large to read.
func handle(ctx context.Context, raw []byte, size uint64) tool.Result {
	g, ok := gate.GuestFrom(ctx)
	if !ok {
		return localEnvelope("", tool.Errorf(tool.CodeInternal,
			"warden_call works only inside a wasm tool call run by warden",
			"warden_call: no wasm tool call in progress (no guest in the call's context)"))
	}
	if raw == nil {
		return localEnvelope("", tool.Errorf(tool.CodeWasmLimit,
			fmt.Sprintf("send at most %d bytes (arguments at most %d)", maxRequestBytes, tool.MaxArgsBytes),
			"warden_call request is %d bytes; the limit is %d", size, maxRequestBytes))
	}
	toolName, args, problem := parseRequest(raw)
	if problem != "" {
		b, _ := json.Marshal("malformed warden_call request: " + problem + "; request: " + echo(raw))
		args = b // a JSON string: never a valid arguments object
	}
	// The core tool runs as itself under the guest's grants: the context
	// it gets carries no guest (see the package doc), nor the guest's
	// exchange.
	res, err := g.Call(gate.WithGuest(context.WithValue(ctx, exchangeKey{}, (*exchange)(nil)), nil), toolName, args)
	if err != nil {
		name := res.Tool
		if name == "" {
			name = toolName
		}
		e := localEnvelope(name, tool.Errorf(tool.CodeInternal, "the call did not run or its result is not on record; try again",
			"warden could not make the call of %s through its gate or record it in the audit log", truncate(name, 128)))
		if res.CallID != "" {
			e.CallID = res.CallID
		}
		return e
	}
	if problem != "" && res.Error != nil {
		msg := "malformed warden_call request: " + problem
		if res.Error.Code != tool.CodeInvalidInput {
			msg += "; " + res.Error.Message
		}
		res.Error = &tool.Error{Code: res.Error.Code, Message: msg, Hint: requestHint}
	}
	return res
}

// readRequest reads the guest's request block at off. ok is false when off
// is not a live block; raw is nil (and size set) when the block is over
// maxRequestBytes.
func readRequest(p *extism.CurrentPlugin, off uint64) (raw []byte, size uint64, ok bool) {
	if off == 0 || off > math.MaxUint32 {
		return nil, 0, false
	}
	n, err := p.Length(off) // 0 for anything that is not a live block
	if err != nil || n == 0 || off+n > math.MaxUint32 {
		return nil, 0, false
	}
	mem := p.Memory()
	if mem == nil || uint64(mem.Size()) < off+n {
		return nil, 0, false
	}
	if n > maxRequestBytes {
		return nil, n, true
	}
	b, ok := mem.Read(uint32(off), uint32(n))
	if !ok {
		return nil, 0, false
	}
	return bytes.Clone(b), n, true // Read is a view of the guest's memory
}

// parseRequest decodes {"tool":"…","args":…} strictly: one JSON object,
// exactly the fields tool (a string) and args, each once, nothing after it.
// problem is "" for a well-formed request; otherwise tool is the name that
// could be read ("" if none). args is returned as sent (the gate decides
// whether it is an object, and checks it for duplicate keys).
func parseRequest(raw []byte) (tool string, args json.RawMessage, problem string) {
	if !utf8.Valid(raw) {
		return "", nil, "the request is not valid UTF-8"
	}
	if tool, args, ok := parseCanonical(raw); ok {
		return tool, args, ""
	}
	return parseGeneral(raw)
}

// parseCanonical reads the request in the form the guest helper sends,
// {"tool":"<name>","args":<value>} (whitespace allowed where JSON allows
// it, no escape in the name), as parseGeneral would, without its
// tokenizer; ok is false for any other form. raw is valid UTF-8.
func parseCanonical(raw []byte) (tool string, args json.RawMessage, ok bool) {
	i, ok := expect(raw, 0, `{`)
	if i, ok = expectAfter(raw, i, ok, `"tool"`); ok {
		i, ok = expectAfter(raw, i, ok, `:`)
	}
	if i, ok = expectAfter(raw, i, ok, `"`); !ok {
		return "", nil, false
	}
	start := i
	for i < len(raw) && raw[i] != '"' && raw[i] != '\\' && raw[i] >= 0x20 {
		i++
	}
	if i == start || i >= len(raw) || raw[i] != '"' {
		return "", nil, false
	}
	name := raw[start:i]
	i, ok = expect(raw, i+1, `,`)
	i, ok = expectAfter(raw, i, ok, `"args"`)
	i, ok = expectAfter(raw, i, ok, `:`)
	end := len(bytes.TrimRight(raw, " \t\r\n"))
	if !ok || end <= i || raw[end-1] != '}' {
		return "", nil, false
	}
	value := bytes.Trim(raw[i:end-1], " \t\r\n")
	if len(value) == 0 || !json.Valid(value) {
		return "", nil, false
	}
	return string(name), value, true
}

// expect skips JSON whitespace from i and then lit; ok is false when lit
// is not there.
func expect(raw []byte, i int, lit string) (int, bool) {
	for i < len(raw) && (raw[i] == ' ' || raw[i] == '\t' || raw[i] == '\r' || raw[i] == '\n') {
		i++
	}
	if !bytes.HasPrefix(raw[i:], []byte(lit)) {
		return i, false
	}
	return i + len(lit), true
}

// expectAfter is expect when ok.
func expectAfter(raw []byte, i int, ok bool, lit string) (int, bool) {
	if !ok {
		return i, false
	}
	return expect(raw, i, lit)
}

// parseGeneral is parseRequest for any request.
func parseGeneral(raw []byte) (tool string, args json.RawMessage, problem string) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	tok, err := dec.Token()
	if err != nil {
		return "", nil, "the request is not JSON: " + jsonErr(err)
	}
	if d, ok := tok.(json.Delim); !ok || d != '{' {
		return "", nil, "the request is not a JSON object"
	}
	var seenTool, seenArgs bool
	fail := func(p string) {
		if problem == "" {
			problem = p
		}
	}
	for dec.More() {
		kt, err := dec.Token()
		if err != nil {
			fail("the request is not valid JSON: " + jsonErr(err))
			return tool, nil, problem
		}
		key, _ := kt.(string)
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			fail("the request is not valid JSON: " + jsonErr(err))
			return tool, nil, problem
		}
		switch key {
		case "tool":
			if seenTool {
				fail(`field "tool" is given twice`)
				continue
			}
			seenTool = true
			if len(v) == 0 || v[0] != '"' || json.Unmarshal(v, &tool) != nil {
				fail(`field "tool" is not a string`)
			}
		case "args":
			if seenArgs {
				fail(`field "args" is given twice`)
				continue
			}
			seenArgs = true
			args = v
		default:
			fail(fmt.Sprintf("unknown field %q (field names are case-sensitive)", truncate(key, 64)))
		}
	}
	if _, err := dec.Token(); err != nil {
		fail("the request is not valid JSON: " + jsonErr(err))
		return tool, nil, problem
	}
	if _, err := dec.Token(); err != io.EOF {
		fail("unexpected data after the request object")
	}
	switch {
	case !seenTool:
		fail(`field "tool" is missing`)
	case tool == "":
		fail(`field "tool" is empty`)
	case !seenArgs:
		fail(`field "args" is missing (send {} for no arguments)`)
	}
	if problem != "" {
		return tool, nil, problem
	}
	return tool, args, ""
}

// localEnvelope is an envelope made without the gate.
func localEnvelope(toolName string, e *tool.Error) tool.Result {
	return tool.Result{
		Tool: toolName, CallID: tool.NewID(), Success: false,
		Data: json.RawMessage("{}"), Warnings: []string{}, Error: e,
	}
}

// writeEnvelope writes res as JSON into a new block of the guest's memory
// and returns its offset; if it does not fit, a short WASM_LIMIT envelope
// instead; 0 when not even that fits.
func writeEnvelope(p *extism.CurrentPlugin, res tool.Result) uint64 {
	b, err := json.Marshal(res)
	if err != nil { // cannot happen: Result holds valid JSON only
		res = localEnvelope(res.Tool, tool.Errorf(tool.CodeInternal, "", "the envelope could not be encoded"))
		b, _ = json.Marshal(res)
	}
	if off, ok := writeBlock(p, b); ok {
		return off
	}
	short := localEnvelope(res.Tool, tool.Errorf(tool.CodeWasmLimit, "give the tool more memory (limits.memory_mb) or ask for less",
		"the envelope of %s (%d bytes) does not fit in the guest's memory", truncate(res.Tool, 128), len(b)))
	short.CallID = res.CallID
	sb, _ := json.Marshal(short)
	if len(sb) >= len(b) {
		return 0
	}
	off, _ := writeBlock(p, sb)
	return off
}

// writeBlock allocates a block of len(b) bytes in the guest's memory and
// fills it.
func writeBlock(p *extism.CurrentPlugin, b []byte) (uint64, bool) {
	if len(b) == 0 || uint64(len(b)) > math.MaxUint32 {
		return 0, false
	}
	off, err := p.Alloc(uint64(len(b)))
	if err != nil || off == 0 { // the kernel answers 0 when memory cannot grow
		return 0, false
	}
	if off+uint64(len(b)) > math.MaxUint32 || !p.Memory().Write(uint32(off), b) {
		_ = p.Free(off)
		return 0, false
	}
	return off, true
}

// echo is the start of a malformed request, as text for the record.
func echo(raw []byte) string {
	s := strings.ToValidUTF8(truncate(string(raw), maxEchoBytes), "\uFFFD")
	if len(raw) > maxEchoBytes {
		s += fmt.Sprintf("… (%d bytes)", len(raw))
	}
	return s
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

func jsonErr(err error) string {
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return "unexpected end of JSON"
	}
	return err.Error()
}
