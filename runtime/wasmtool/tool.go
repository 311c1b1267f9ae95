package wasmtool

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/wardenrt/warden/runtime/capability"
	"github.com/wardenrt/warden/runtime/gate"
	"github.com/wardenrt/warden/runtime/internal/wasm"
	"github.com/wardenrt/warden/runtime/tool"
)

// Tool is one tool of an approved module, served from its pin.
type Tool struct {
	host   *Host
	module string
	pin    *Pin
	spec   ToolSpec
	key    string // compileKey(module, pin), computed once at Load
}

var _ tool.Tool = (*Tool)(nil)

// Module returns the name of the module the tool comes from.
func (t *Tool) Module() string { return t.module }

// Spec implements tool.Tool.
func (t *Tool) Spec() tool.Spec {
	kinds := map[capability.Kind]bool{}
	var caps []capability.Kind
	for _, s := range append(append([]string{}, t.pin.Requested...), t.pin.Granted...) {
		if g, err := capability.Parse(s); err == nil && !kinds[g.Kind()] {
			kinds[g.Kind()] = true
			caps = append(caps, g.Kind())
		}
	}
	return tool.Spec{
		Name:         t.spec.Name,
		Description:  t.spec.Description,
		InputSchema:  t.spec.InputSchema,
		Capabilities: caps,
		Wasm:         t.module,
	}
}

// Needs implements tool.Tool. Calling a wasm tool touches nothing by
// itself: each thing its guest reaches is a host call, checked by the gate
// with the run's grants ∩ the tool's.
func (t *Tool) Needs(*tool.Call) ([]capability.Need, error) { return nil, nil }

// Preview implements tool.Tool: the guest runs with every host call a
// dry run, so it computes what it would do and changes nothing.
func (t *Tool) Preview(ctx context.Context, c *tool.Call) tool.Outcome {
	o := t.Run(ctx, c)
	o.Warnings = append(o.Warnings, "dry run: the guest ran with every host call previewed; nothing was changed")
	return o
}

// Run implements tool.Tool.
func (t *Tool) Run(ctx context.Context, c *tool.Call) tool.Outcome {
	g, ok := gate.GateFrom(ctx)
	if !ok {
		return tool.Fail(tool.CodeInternal, "", "wasm tool %s called outside the gate", t.spec.Name)
	}
	granted, err := capability.ParseSet(c.Workspace, t.pin.Granted)
	if err != nil {
		return tool.Fail(tool.CodeInternal, "fix the grants with `warden tool grant`/`revoke`", "the grants of %s do not parse: %v", t.module, err)
	}
	guest := &gate.Guest{Gate: g, Tool: t.spec.Name, Parent: c, Granted: granted, HostTimeout: t.host.o.HostTimeout}
	mod, err := t.host.module(ctx, t.module, t.pin, t.key)
	if err != nil {
		var rerr *tool.Error
		if errors.As(err, &rerr) {
			return tool.Outcome{Err: rerr}
		}
		return tool.Fail(tool.CodeInternal, fmt.Sprintf("see `warden tool inspect %s`", t.module), "module %s does not load: %v", t.module, err)
	}
	effective := guest.Grants()
	cfg, warnings, cerr := t.config(g, effective)
	if cerr != nil {
		return tool.Outcome{Err: cerr}
	}
	opts := wasm.CallOptions{
		Config:  cfg,
		HTTP:    true,
		PoolKey: fmt.Sprintf("%v|%s", c.DryRun, effective.String()),
	}
	input, ierr := t.input(c.Args)
	if ierr != nil {
		return tool.Outcome{Err: ierr}
	}
	ctx = gate.WithGuest(ctx, guest)
	if t.host.o.CallContext != nil {
		ctx = t.host.o.CallContext(ctx)
	}
	var out []byte
	var info wasm.CallInfo
	switch t.pin.ABI {
	case ABICommand:
		out, info, err = mod.RunCommand(ctx, input, opts)
	case ABIServlet:
		// The guest gets its own name for the tool, whatever warden
		// exposes it as.
		in, _ := json.Marshal(map[string]any{"params": map[string]any{"name": t.spec.guest(), "arguments": c.Args}})
		out, info, err = mod.Call(ctx, "call", in, opts)
	default:
		out, info, err = mod.Call(ctx, t.spec.Export, input, opts)
	}
	t.log(c, info, err, g)
	if err != nil {
		return tool.Outcome{Err: t.callError(ctx, err), Warnings: warnings}
	}
	var o tool.Outcome
	switch t.pin.ABI {
	case ABICommand:
		if info.Exited && info.ExitCode != 0 {
			return tool.Outcome{Err: tool.Errorf(tool.CodeToolError, "", "%s exited with code %d%s", t.spec.Name, info.ExitCode, tail(info.Stderr)), Warnings: warnings}
		}
		o = t.resultOutcome(out)
	case ABIServlet:
		o = servletOutcome(t.spec.Name, out)
	default:
		o = t.resultOutcome(out)
	}
	o.Warnings = append(warnings, o.Warnings...)
	return o
}

// input is what an Extism plugin's export (or a command's stdin) gets: the
// JSON arguments, or with input: {from: ARG} the string argument ARG as
// raw bytes (empty when absent).
func (t *Tool) input(args json.RawMessage) ([]byte, *tool.Error) {
	if t.pin.InputFrom == "" {
		return args, nil
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(args, &m); err != nil {
		return nil, tool.Errorf(tool.CodeInvalidInput, "", "arguments: %v", err)
	}
	raw, ok := m[t.pin.InputFrom]
	if !ok {
		return []byte{}, nil
	}
	var text string
	if err := json.Unmarshal(raw, &text); err != nil {
		return nil, tool.Errorf(tool.CodeInvalidInput, "", "argument %s must be a string", t.pin.InputFrom)
	}
	return []byte(text), nil
}

// resultOutcome reads a plugin's or command's output by the sidecar's
// output mode.
func (t *Tool) resultOutcome(out []byte) tool.Outcome {
	switch t.pin.Output {
	case OutputText:
		if !utf8.Valid(out) {
			return tool.Fail(tool.CodeToolError, "", "the guest's output is not UTF-8 text (%d bytes)", len(out))
		}
		return tool.Outcome{Output: string(out)}
	case OutputJSON:
		if !json.Valid(out) {
			return tool.Fail(tool.CodeToolError, "", "the guest's output is not JSON, as its sidecar says (output: json): %.200q", out)
		}
		return tool.Outcome{Output: string(out), Data: json.RawMessage(out)}
	}
	return resultOutcome(out)
}

func (t *Tool) callError(ctx context.Context, err error) *tool.Error {
	var rerr *tool.Error
	if errors.As(err, &rerr) {
		return rerr
	}
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return tool.Errorf(tool.CodeTimeout, "", "the call's deadline passed while %s ran", t.spec.Name)
	}
	if ctx.Err() != nil {
		return tool.Errorf(tool.CodeUserCancelled, "", "cancelled while %s ran", t.spec.Name)
	}
	return tool.Errorf(tool.CodeInternal, "", "%s: %v", t.spec.Name, err)
}

// log sends the guest's captured output to warden's log (never the
// terminal).
func (t *Tool) log(c *tool.Call, info wasm.CallInfo, err error, gate *gate.Gate) {
	lg := t.host.o.Logger
	attrs := []any{"tool", t.spec.Name, "module", t.module, "call_id", c.ID, "duration_ms", info.Duration.Milliseconds()}
	// Masked here too, whatever the log handler does: the guest may have
	// printed a secret it was given (config_get).
	if len(info.Stdout) > 0 {
		attrs = append(attrs, "guest_stdout", gate.Redact(string(info.Stdout)), "guest_stdout_dropped", info.StdoutDropped)
	}
	if len(info.Stderr) > 0 {
		attrs = append(attrs, "guest_stderr", gate.Redact(string(info.Stderr)), "guest_stderr_dropped", info.StderrDropped)
	}
	if err != nil {
		lg.Info("wasm guest failed", append(attrs, "err", gate.Redact(err.Error()))...)
		return
	}
	if len(info.Stdout) > 0 || len(info.Stderr) > 0 {
		lg.Info("wasm guest output", attrs...)
	}
}

// tail is the end of a guest's stderr, for an error message.
func tail(b []byte) string {
	s := strings.TrimSpace(string(b))
	if s == "" {
		return ""
	}
	if len(s) > 512 {
		s = "…" + s[len(s)-512:]
		for !utf8.ValidString(s) && len(s) > 0 {
			s = s[1:]
		}
	}
	return ": " + s
}

// resultOutcome turns a guest's output into an outcome: a JSON object is
// also the result's data; anything else is text.
func resultOutcome(out []byte) tool.Outcome {
	if !utf8.Valid(out) {
		return tool.Fail(tool.CodeToolError, "", "the guest's output is not UTF-8 text (%d bytes)", len(out))
	}
	o := tool.Outcome{Output: string(out)}
	if obj := jsonObject(out); obj != nil {
		o.Data = obj
	}
	return o
}

func jsonObject(b []byte) json.RawMessage {
	s := strings.TrimSpace(string(b))
	if !strings.HasPrefix(s, "{") || !json.Valid([]byte(s)) {
		return nil
	}
	return json.RawMessage(s)
}

// servletOutcome reads a servlet's call result:
// {"content":[{"type":"text","text":…}],"isError":…}.
func servletOutcome(name string, out []byte) tool.Outcome {
	var r struct {
		Content []struct {
			Type string `json:"type"`
			Text string `json:"text"`
		} `json:"content"`
		IsError bool `json:"isError"`
	}
	if err := json.Unmarshal(out, &r); err != nil {
		return tool.Fail(tool.CodeToolError, "", "%s returned a result that is not the servlet format: %v", name, err)
	}
	var texts []string
	for _, c := range r.Content {
		if c.Type == "text" {
			texts = append(texts, c.Text)
		}
	}
	text := strings.Join(texts, "\n")
	if r.IsError {
		return tool.Fail(tool.CodeToolError, "", "%s", text)
	}
	o := tool.Outcome{Output: text}
	if obj := jsonObject([]byte(text)); obj != nil {
		o.Data = obj
	}
	return o
}
