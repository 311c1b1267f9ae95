package wasmtools_test

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
	"github.com/tetratelabs/wazero/imports/wasi_snapshot_preview1"

	wasmtools "github.com/wardenrt/warden/wasm-tools"
)

// fakeHost is a minimal stand-in for the Extism kernel plus warden's
// warden_call, enough to run the examples' exports and check the guest side
// of the ABI end to end. It is NOT warden's host: no limits, no gate, and
// no buffer path (warden_buffer answers 0, so guests send through
// warden_call; hostfuncs' tests run the buffer path against warden's own).
type fakeHost struct {
	mu     sync.Mutex
	arena  []byte            // Extism memory; offset 0 is the null block
	blocks map[uint64]uint64 // offset → length
	input  []byte
	output []byte
	errMsg string
	config map[string]string
	// call answers warden_call; nil answers offset 0.
	call     func(req []byte) []byte
	requests []string
	// http answers http_request like Extism's host does after its checks;
	// an error is a refused request, which traps the guest (Extism panics
	// in the host function). nil refuses every request.
	http         func(req fakeHTTPRequest) (status int, headers map[string]string, body []byte, err error)
	httpRequests []fakeHTTPRequest
	lastStatus   int
	lastHeaders  map[string]string
}

// fakeHTTPRequest is the request JSON go-pdk sends to http_request.
type fakeHTTPRequest struct {
	URL     string            `json:"url"`
	Method  string            `json:"method"`
	Headers map[string]string `json:"headers"`
}

func newFakeHost() *fakeHost {
	return &fakeHost{arena: make([]byte, 8), blocks: map[uint64]uint64{}, config: map[string]string{}}
}

func (h *fakeHost) alloc(b []byte) uint64 {
	off := uint64(len(h.arena))
	h.arena = append(h.arena, b...)
	h.blocks[off] = uint64(len(b))
	return off
}

func (h *fakeHost) block(off uint64) []byte {
	n, ok := h.blocks[off]
	if !ok {
		return nil
	}
	return h.arena[off : off+n]
}

// instantiate builds the extism:host/env and warden host modules in rt.
func (h *fakeHost) instantiate(ctx context.Context, t *testing.T, rt wazero.Runtime) {
	i64, i32 := api.ValueTypeI64, api.ValueTypeI32
	env := rt.NewHostModuleBuilder("extism:host/env")
	fn := func(name string, params, results []api.ValueType, f func(stack []uint64)) {
		env.NewFunctionBuilder().WithGoFunction(api.GoFunc(func(_ context.Context, stack []uint64) {
			h.mu.Lock()
			defer h.mu.Unlock()
			f(stack)
		}), params, results).Export(name)
	}
	none := []api.ValueType{}
	fn("input_length", none, []api.ValueType{i64}, func(s []uint64) { s[0] = uint64(len(h.input)) })
	fn("input_load_u8", []api.ValueType{i64}, []api.ValueType{i32}, func(s []uint64) { s[0] = uint64(h.input[s[0]]) })
	fn("input_load_u64", []api.ValueType{i64}, []api.ValueType{i64}, func(s []uint64) { s[0] = binary.LittleEndian.Uint64(h.input[s[0]:]) })
	fn("output_set", []api.ValueType{i64, i64}, none, func(s []uint64) { h.output = append([]byte{}, h.arena[s[0]:s[0]+s[1]]...) })
	fn("error_set", []api.ValueType{i64}, none, func(s []uint64) { h.errMsg = string(h.block(s[0])) })
	fn("config_get", []api.ValueType{i64}, []api.ValueType{i64}, func(s []uint64) {
		v, ok := h.config[string(h.block(s[0]))]
		s[0] = 0
		if ok {
			s[0] = h.alloc([]byte(v))
		}
	})
	length := func(s []uint64) { s[0] = h.blocks[s[0]] }
	fn("length", []api.ValueType{i64}, []api.ValueType{i64}, length)
	fn("length_unsafe", []api.ValueType{i64}, []api.ValueType{i64}, length)
	fn("alloc", []api.ValueType{i64}, []api.ValueType{i64}, func(s []uint64) { s[0] = h.alloc(make([]byte, s[0])) })
	fn("free", []api.ValueType{i64}, none, func([]uint64) {})
	fn("load_u8", []api.ValueType{i64}, []api.ValueType{i32}, func(s []uint64) { s[0] = uint64(h.arena[s[0]]) })
	fn("load_u64", []api.ValueType{i64}, []api.ValueType{i64}, func(s []uint64) { s[0] = binary.LittleEndian.Uint64(h.arena[s[0]:]) })
	fn("store_u8", []api.ValueType{i64, i32}, none, func(s []uint64) { h.arena[s[0]] = byte(s[1]) })
	fn("store_u64", []api.ValueType{i64, i64}, none, func(s []uint64) { binary.LittleEndian.PutUint64(h.arena[s[0]:], s[1]) })
	fn("http_request", []api.ValueType{i64, i64}, []api.ValueType{i64}, func(s []uint64) {
		var req fakeHTTPRequest
		if err := json.Unmarshal(h.block(s[0]), &req); err != nil {
			panic(fmt.Errorf("invalid http request: %v", err))
		}
		h.httpRequests = append(h.httpRequests, req)
		h.lastStatus, h.lastHeaders = 0, nil
		if h.http == nil {
			panic(fmt.Errorf("HTTP request to '%s' is not allowed", req.URL))
		}
		status, headers, body, err := h.http(req)
		if err != nil {
			panic(err)
		}
		h.lastStatus, h.lastHeaders = status, headers
		s[0] = 0
		if len(body) > 0 {
			s[0] = h.alloc(body)
		}
	})
	fn("http_status_code", none, []api.ValueType{i32}, func(s []uint64) { s[0] = uint64(h.lastStatus) })
	fn("http_headers", none, []api.ValueType{i64}, func(s []uint64) {
		s[0] = 0
		if h.lastHeaders != nil {
			b, _ := json.Marshal(h.lastHeaders)
			s[0] = h.alloc(b)
		}
	})
	if _, err := env.Instantiate(ctx); err != nil {
		t.Fatal(err)
	}
	_, err := rt.NewHostModuleBuilder("warden").NewFunctionBuilder().WithGoFunction(api.GoFunc(func(_ context.Context, s []uint64) {
		h.mu.Lock()
		defer h.mu.Unlock()
		req := string(h.block(s[0]))
		h.requests = append(h.requests, req)
		s[0] = 0
		if h.call != nil {
			s[0] = h.alloc(h.call([]byte(req)))
		}
	}), []api.ValueType{i64}, []api.ValueType{i64}).Export("warden_call").
		// No buffer path: a guest sends through warden_call.
		NewFunctionBuilder().WithGoFunction(api.GoFunc(func(_ context.Context, s []uint64) { s[0] = 0 }), []api.ValueType{i64}, []api.ValueType{i64}).Export("warden_buffer").
		NewFunctionBuilder().WithGoFunction(api.GoFunc(func(_ context.Context, s []uint64) { s[0] = 0 }), []api.ValueType{i64}, []api.ValueType{i64}).Export("warden_call_buffer").
		Instantiate(ctx)
	if err != nil {
		t.Fatal(err)
	}
}

// plugin is one instantiated reactor module.
type plugin struct {
	h   *fakeHost
	mod api.Module
}

func (p *plugin) call(ctx context.Context, t *testing.T, export, input string) (rc uint32, output, errMsg string, err error) {
	t.Helper()
	p.h.mu.Lock()
	p.h.input, p.h.output, p.h.errMsg = []byte(input), nil, ""
	p.h.mu.Unlock()
	fn := p.mod.ExportedFunction(export)
	if fn == nil {
		t.Fatalf("no export %q", export)
	}
	res, err := fn.Call(ctx)
	if err != nil {
		return 0, "", "", err
	}
	return uint32(res[0]), string(p.h.output), p.h.errMsg, nil
}

func loadPlugin(ctx context.Context, t *testing.T, name string, h *fakeHost) *plugin {
	t.Helper()
	root, err := wasmtools.Root()
	if err != nil {
		t.Fatal(err)
	}
	f, ok := wasmtools.Lookup(name)
	if !ok {
		t.Fatalf("no fixture %s", name)
	}
	out := filepath.Join(t.TempDir(), name+".wasm")
	if err := wasmtools.Build(f.Path(root), out, f.Command()); err != nil {
		t.Fatal(err)
	}
	bin, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	return instantiatePlugin(ctx, t, bin, h)
}

// instantiatePlugin instantiates a reactor module (running _initialize)
// against h.
func instantiatePlugin(ctx context.Context, t *testing.T, bin []byte, h *fakeHost) *plugin {
	t.Helper()
	rt := wazero.NewRuntimeWithConfig(ctx, wazero.NewRuntimeConfig().WithCloseOnContextDone(true))
	t.Cleanup(func() { rt.Close(context.Background()) })
	wasi_snapshot_preview1.MustInstantiate(ctx, rt)
	h.instantiate(ctx, t, rt)
	mod, err := rt.InstantiateWithConfig(ctx, bin, wazero.NewModuleConfig().WithStartFunctions("_initialize"))
	if err != nil {
		t.Fatal(err)
	}
	return &plugin{h: h, mod: mod}
}

// TestGuestABIEndToEnd runs the examples against the fake host: strict
// arguments, output and error_set, warden_call's request and envelope
// blocks, the servlet convention, and a real `unreachable` trap.
func TestGuestABIEndToEnd(t *testing.T) {
	if testing.Short() {
		t.Skip("builds guest modules; skipped with -short")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel) // after the parallel subtests

	t.Run("textstats", func(t *testing.T) {
		t.Parallel()
		p := loadPlugin(ctx, t, "textstats", newFakeHost())
		rc, out, _, err := p.call(ctx, t, "call", `{"text":"One fish. Two fish!","top":1}`)
		if err != nil || rc != 0 {
			t.Fatalf("rc %d, err %v", rc, err)
		}
		var s struct {
			Words, Sentences int
			TopWords         []struct{ Word string } `json:"top_words"`
		}
		if err := json.Unmarshal([]byte(out), &s); err != nil || s.Words != 4 || s.Sentences != 2 || s.TopWords[0].Word != "fish" {
			t.Fatalf("output %s: %v", out, err)
		}
		rc, _, msg, err := p.call(ctx, t, "call", `{"Text":"x"}`)
		if err != nil || rc != 1 || !strings.Contains(msg, "case-sensitive") {
			t.Fatalf("case-variant field: rc %d, error %q, %v", rc, msg, err)
		}
	})

	t.Run("notes", func(t *testing.T) {
		t.Parallel()
		h := newFakeHost()
		p := loadPlugin(ctx, t, "notes", h)
		h.call = func(req []byte) []byte {
			return []byte(`{"tool":"write_memory","call_id":"c1","success":true,"dry_run":false,"output":"stored","data":{},"warnings":["overwrites the existing entry notes/k"],"duration_ms":1}`)
		}
		rc, out, msg, err := p.call(ctx, t, "call", `{"op":"add","key":"k","text":"buy milk"}`)
		if err != nil || rc != 0 || !strings.Contains(out, "overwrites") {
			t.Fatalf("add: rc %d out %s error %q %v", rc, out, msg, err)
		}
		if got := h.requests[len(h.requests)-1]; got != `{"tool":"write_memory","args":{"key":"k","namespace":"notes","value":"buy milk"}}` {
			t.Fatalf("request %s", got)
		}
		h.call = func(req []byte) []byte {
			return []byte(`{"tool":"query_memory","call_id":"c2","success":false,"dry_run":false,"output":"","data":null,"warnings":[],"error":{"code":"CAPABILITY_DENIED","message":"needs memory.read:notes","hint":"warden tool grant notes memory.read:notes"},"duration_ms":0}`)
		}
		rc, _, msg, err = p.call(ctx, t, "call", `{"op":"search","query":"milk"}`)
		if err != nil || rc != 1 || !strings.HasPrefix(msg, "CAPABILITY_DENIED: needs memory.read:notes") {
			t.Fatalf("denied: rc %d error %q %v", rc, msg, err)
		}
		h.call = func(req []byte) []byte {
			return []byte(`{"tool":"query_memory","call_id":"c3","success":true,"dry_run":false,"output":"1 result","data":{"results":[{"namespace":"notes","key":"k","value":"buy milk","score":1.5,"updated":"2025-01-02T03:04:05Z"}]},"warnings":[],"duration_ms":0}`)
		}
		rc, out, msg, err = p.call(ctx, t, "call", `{"op":"search","query":"milk"}`)
		if err != nil || rc != 0 || out != `{"query":"milk","notes":[{"key":"k","text":"buy milk","score":1.5}]}` {
			t.Fatalf("search: rc %d out %s error %q %v", rc, out, msg, err)
		}
		h.call = nil // the host answers 0
		rc, _, msg, err = p.call(ctx, t, "call", `{"op":"search","query":"milk"}`)
		if err != nil || rc != 1 || !strings.Contains(msg, "no envelope") {
			t.Fatalf("no envelope: rc %d error %q %v", rc, msg, err)
		}
	})

	t.Run("jsontools", func(t *testing.T) {
		t.Parallel()
		p := loadPlugin(ctx, t, "jsontools", newFakeHost())
		rc, out, _, err := p.call(ctx, t, "describe", ``)
		var d struct {
			Tools []struct {
				Name        string          `json:"name"`
				InputSchema json.RawMessage `json:"inputSchema"`
			} `json:"tools"`
		}
		if err != nil || rc != 0 || json.Unmarshal([]byte(out), &d) != nil || len(d.Tools) != 2 || d.Tools[0].Name != "json_query" || d.Tools[1].Name != "json_format" {
			t.Fatalf("describe: rc %d out %s %v", rc, out, err)
		}
		rc, out, _, err = p.call(ctx, t, "call", `{"params":{"name":"json_query","arguments":{"json":"{\"a\":[1,{\"b\":true}]}","path":"a[1].b"}}}`)
		if err != nil || rc != 0 || out != `{"content":[{"type":"text","text":"true"}],"isError":false}` {
			t.Fatalf("call: rc %d out %s %v", rc, out, err)
		}
		rc, out, _, err = p.call(ctx, t, "call", `{"params":{"name":"json_format","arguments":{"json":"{","indent":2}}}`)
		if err != nil || rc != 0 || !strings.Contains(out, `"isError":true`) {
			t.Fatalf("tool error: rc %d out %s %v", rc, out, err)
		}
	})

	t.Run("webtools", func(t *testing.T) {
		t.Parallel()
		h := newFakeHost()
		h.config["user_agent"] = "test-agent/1"
		p := loadPlugin(ctx, t, "webtools", h)
		rc, out, _, err := p.call(ctx, t, "describe", ``)
		var d struct {
			Tools []struct {
				Name        string         `json:"name"`
				InputSchema map[string]any `json:"inputSchema"`
			} `json:"tools"`
		}
		if err != nil || rc != 0 || json.Unmarshal([]byte(out), &d) != nil || len(d.Tools) != 2 || d.Tools[0].Name != "web_get" || d.Tools[1].Name != "web_links" {
			t.Fatalf("describe: rc %d out %s %v", rc, out, err)
		}
		for _, tool := range d.Tools {
			if open := openObjects(tool.InputSchema, tool.Name); len(open) > 0 {
				t.Errorf("open schemas: %v", open)
			}
		}

		page := `<html><a href="/about">About <b>us</b></a> <a href="https://www.iana.org/domains">IANA</a></html>`
		h.http = func(req fakeHTTPRequest) (int, map[string]string, []byte, error) {
			return 200, map[string]string{"content-type": "text/html"}, []byte(page), nil
		}
		rc, out, _, err = p.call(ctx, t, "call", `{"params":{"name":"web_get","arguments":{"url":"https://example.com/","max_bytes":6}}}`)
		want := fmt.Sprintf(`{"content":[{"type":"text","text":"{\"url\":\"https://example.com/\",\"status\":200,\"content_type\":\"text/html\",\"bytes\":%d,\"body\":\"\u003chtml\u003e\",\"truncated\":true}"}],"isError":false}`, len(page))
		if err != nil || rc != 0 || out != want {
			t.Fatalf("web_get: rc %d, %v\nout  %s\nwant %s", rc, err, out, want)
		}
		if got := h.httpRequests[0]; got.URL != "https://example.com/" || got.Method != "GET" || got.Headers["User-Agent"] != "test-agent/1" {
			t.Fatalf("request %+v", got)
		}

		rc, out, _, err = p.call(ctx, t, "call", `{"params":{"name":"web_links","arguments":{"url":"https://example.com/x/"}}}`)
		if err != nil || rc != 0 || !strings.Contains(out, `{\"url\":\"https://example.com/about\",\"text\":\"About us\"},{\"url\":\"https://www.iana.org/domains\",\"text\":\"IANA\"}`) {
			t.Fatalf("web_links: rc %d out %s %v", rc, out, err)
		}

		// No response headers (Extism's default): no content type.
		h.http = func(fakeHTTPRequest) (int, map[string]string, []byte, error) { return 404, nil, nil, nil }
		rc, out, _, err = p.call(ctx, t, "call", `{"params":{"name":"web_get","arguments":{"url":"http://example.com/missing"}}}`)
		if err != nil || rc != 0 || !strings.Contains(out, `\"status\":404,\"bytes\":0,`) {
			t.Fatalf("404: rc %d out %s %v", rc, out, err)
		}
		// A tool error is a result; a malformed call is the export's error.
		rc, out, _, err = p.call(ctx, t, "call", `{"params":{"name":"web_get","arguments":{"url":"ftp://example.com/"}}}`)
		if err != nil || rc != 0 || !strings.Contains(out, `"isError":true`) {
			t.Fatalf("bad url: rc %d out %s %v", rc, out, err)
		}
		rc, _, msg, err := p.call(ctx, t, "call", `{"params":{"name":"web_get","arguments":{}},"extra":1}`)
		if err != nil || rc != 1 || !strings.Contains(msg, `unknown field "extra"`) {
			t.Fatalf("malformed call: rc %d error %q %v", rc, msg, err)
		}
		// A refused request (the host's error) traps the guest.
		h.http = func(req fakeHTTPRequest) (int, map[string]string, []byte, error) {
			return 0, nil, nil, errors.New("CAPABILITY_DENIED: redirect to 127.0.0.1 needs net:127.0.0.1")
		}
		_, _, _, err = p.call(ctx, t, "call", `{"params":{"name":"web_links","arguments":{"url":"https://example.com/"}}}`)
		if err == nil || !strings.Contains(err.Error(), "CAPABILITY_DENIED") {
			t.Fatalf("refused request: %v", err)
		}
	})

	t.Run("trap", func(t *testing.T) {
		t.Parallel()
		p := loadPlugin(ctx, t, "trap", newFakeHost())
		_, _, _, err := p.call(ctx, t, "unreachable", ``)
		if err == nil || !strings.Contains(err.Error(), "unreachable") {
			t.Fatalf("unreachable export: %v", err)
		}
	})
}
