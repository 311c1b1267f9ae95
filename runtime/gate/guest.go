package gate

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"slices"
	"time"

	"github.com/wardenrt/warden/runtime/tool"

	"github.com/wardenrt/warden/runtime/capability"
)

// GateFrom returns the gate that is running the current tool call. The gate
// puts itself in the context of every Run and Preview, so a tool that calls
// other tools on someone's behalf (a wasm tool's host functions) goes back
// through the same gate, grants and audit log.
func GateFrom(ctx context.Context) (*Gate, bool) {
	n, ok := notesFrom(ctx)
	if !ok || n.gate == nil {
		return nil, false
	}
	return n.gate, true
}

// DefaultHostTimeout is the deadline of one host call from a guest when the
// guest gives none.
const DefaultHostTimeout = 30 * time.Second

// Guest is a wasm tool call in progress, as its host functions see it.
type Guest struct {
	// Gate is the gate running the wasm tool's call.
	Gate *Gate
	// Tool is the wasm tool's name.
	Tool string
	// Parent is the wasm tool's own call: its run, principal, grants and
	// dry-run flag (a wasm tool's preview makes every host call a dry run).
	Parent *tool.Call
	// Granted is what the tool's owner granted the tool.
	Granted capability.Set
	// HostTimeout bounds each host call (guest deadlines do not interrupt
	// host code); 0 means DefaultHostTimeout. The guest call's own
	// deadline, if earlier, still applies.
	HostTimeout time.Duration
}

type guestKey struct{}

// WithGuest returns ctx carrying g, for the host functions the guest calls.
func WithGuest(ctx context.Context, g *Guest) context.Context {
	return context.WithValue(ctx, guestKey{}, g)
}

// GuestFrom returns the guest whose host function is running, if any.
func GuestFrom(ctx context.Context) (*Guest, bool) {
	g, ok := ctx.Value(guestKey{}).(*Guest)
	return g, ok && g != nil
}

// Grants returns what the guest acts with: the run's grants (its call's)
// ∩ the grants its owner gave the tool.
func (g *Guest) Grants() capability.Set {
	return g.Parent.Grants.Intersect(g.Granted)
}

// Principal returns the principal chain of the guest's host calls: the
// wasm tool's caller, then wasm:<tool>.
func (g *Guest) Principal() []string {
	return append(slices.Clip(g.Parent.Principal), "wasm:"+g.Tool)
}

// errNoGate is returned by Guest.Call when the guest runs outside a gate.
var errNoGate = errors.New("wasm guest: no gate in the call's context")

// Call makes one call from the guest to a core tool through the gate, with
// the guest's grants, principal chain and run, under the host call's own
// deadline. Refusals and failures are results; the error is non-nil only
// when the gate could not record the call.
func (g *Guest) Call(ctx context.Context, name string, args json.RawMessage) (tool.Result, error) {
	if g.Gate == nil || g.Parent == nil {
		return tool.Result{}, errNoGate
	}
	d := g.HostTimeout
	if d <= 0 {
		d = DefaultHostTimeout
	}
	ctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	restrict := g.Grants()
	return g.Gate.Call(ctx, Request{
		Tool:      name,
		Args:      args,
		RunID:     g.Parent.RunID,
		Principal: g.Principal(),
		Restrict:  &restrict,
		DryRun:    g.Parent.DryRun,
		CoreOnly:  true,
		Vault:     g.Parent.Vault(),
	})
}

// GuestHTTPGuard marks the transport of http.DefaultClient that gates the
// requests a guest makes through Extism's http_request (which always sends
// through http.DefaultClient). The wasm engine lets a guest's requests
// through only while such a transport is installed; without one, Extism
// refuses them all.
type GuestHTTPGuard interface {
	http.RoundTripper
	// GuardsGuestHTTP is a marker: the transport turns every request made
	// in a guest's context into a gated call of the core http tool.
	GuardsGuestHTTP()
}
