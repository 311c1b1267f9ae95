package wasm

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/wardenrt/warden/runtime/gate"
	"github.com/wardenrt/warden/runtime/tool"
)

// guardTransport stands in for warden's gated transport (hostfuncs): it
// implements gate.GuestHTTPGuard, counts the requests it sees, and
// either forwards them or fails them with deny.
type guardTransport struct {
	seen atomic.Int32
	deny *tool.Error
}

func (g *guardTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	g.seen.Add(1)
	if g.deny != nil {
		return nil, fmt.Errorf("gated http tool: %w", g.deny)
	}
	return http.DefaultTransport.RoundTrip(r)
}

func (g *guardTransport) GuardsGuestHTTP() {}

var _ gate.GuestHTTPGuard = (*guardTransport)(nil)

// useTransport installs rt on http.DefaultClient for the test.
func useTransport(t *testing.T, rt http.RoundTripper) {
	old := http.DefaultClient.Transport
	http.DefaultClient.Transport = rt
	t.Cleanup(func() { http.DefaultClient.Transport = old })
}

func TestGuestHTTP(t *testing.T) {
	var hits atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		fmt.Fprint(w, "hello from the server")
	}))
	defer srv.Close()
	ctx := context.Background()
	m := compile(t, "examples/fetch", nil, Limits{})
	in, _ := json.Marshal(map[string]string{"url": srv.URL + "/x"})
	fetch := func(o CallOptions) ([]byte, error) {
		out, _, err := m.Call(ctx, "call", in, o)
		return out, err
	}

	// No guard installed: refused even with HTTP, and without it.
	for _, allow := range []bool{true, false} {
		_, err := fetch(CallOptions{HTTP: allow})
		t.Logf("no guard, HTTP %v: %v", allow, wantCode(t, err, tool.CodeCapabilityDenied))
	}
	// A transport that is not a guard does not count.
	useTransport(t, http.DefaultTransport)
	_, err := fetch(CallOptions{HTTP: true})
	wantCode(t, err, tool.CodeCapabilityDenied)
	if n := hits.Load(); n != 0 {
		t.Fatalf("the server saw %d requests", n)
	}

	// With the guard: the request goes through it, only with HTTP.
	guard := &guardTransport{}
	useTransport(t, guard)
	out, err := fetch(CallOptions{HTTP: true, PoolKey: "k"})
	if err != nil || !strings.Contains(string(out), "hello from the server") {
		t.Fatalf("guarded fetch: %s %v", out, err)
	}
	if guard.seen.Load() != 1 || hits.Load() != 1 {
		t.Errorf("guard saw %d, server %d", guard.seen.Load(), hits.Load())
	}
	// The same pooled instance, without HTTP: refused again.
	_, info, err := m.Call(ctx, "call", in, CallOptions{PoolKey: "k"})
	wantCode(t, err, tool.CodeCapabilityDenied)
	if !info.Pooled || guard.seen.Load() != 1 {
		t.Errorf("pooled %v, guard saw %d", info.Pooled, guard.seen.Load())
	}

	// The guard's *tool.Error survives Extism's panic and wazero's
	// recovery: Call returns it as is.
	guard.deny = tool.Errorf(tool.CodeCapabilityDenied, "grant net:127.0.0.1", "net:127.0.0.1 is not granted")
	_, err = fetch(CallOptions{HTTP: true})
	if e := wantCode(t, err, tool.CodeCapabilityDenied); e != guard.deny {
		t.Errorf("got %v, want the transport's error %v", e, guard.deny)
	}
	if hits.Load() != 1 {
		t.Errorf("the server saw a denied request")
	}
}
