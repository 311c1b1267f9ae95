//go:build unix

package memory

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
	"unicode"

	"github.com/wardenrt/warden/builtin/internal/tooltest"
	"github.com/wardenrt/warden/runtime/gate"
	"github.com/wardenrt/warden/runtime/tool"
)

// fake is a small but real gate.Memory: a map of namespaces, a
// clock that ticks on every write, and a naive ranking (the sum of the
// query terms' frequencies in the value). It calls the namespace filter
// once per namespace per search, as the store does.
type fake struct {
	mu    sync.Mutex
	data  map[string]map[string]gate.MemoryEntry
	tick  time.Time
	puts  int
	reads int
	fail  error
}

func newMemoryFake() *fake {
	return &fake{data: map[string]map[string]gate.MemoryEntry{}, tick: time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)}
}

func (m *fake) PutMemory(_ context.Context, ns, key, value string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.fail != nil {
		return m.fail
	}
	if ns == "" || key == "" {
		return errors.New("empty namespace or key")
	}
	m.puts++
	m.tick = m.tick.Add(time.Second)
	if m.data[ns] == nil {
		m.data[ns] = map[string]gate.MemoryEntry{}
	}
	e, ok := m.data[ns][key]
	if !ok {
		e = gate.MemoryEntry{Namespace: ns, Key: key, Created: m.tick}
	}
	e.Value, e.Updated = value, m.tick
	m.data[ns][key] = e
	return nil
}

func (m *fake) GetMemory(_ context.Context, ns, key string) (gate.MemoryEntry, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.fail != nil {
		return gate.MemoryEntry{}, m.fail
	}
	m.reads++
	e, ok := m.data[ns][key]
	if !ok {
		return e, fmt.Errorf("%s/%s: %w", ns, key, gate.ErrNotFound)
	}
	return e, nil
}

func (m *fake) DeleteMemory(_ context.Context, ns, key string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.fail != nil {
		return m.fail
	}
	if _, ok := m.data[ns][key]; !ok {
		return fmt.Errorf("%s/%s: %w", ns, key, gate.ErrNotFound)
	}
	delete(m.data[ns], key)
	if len(m.data[ns]) == 0 {
		delete(m.data, ns)
	}
	return nil
}

func (m *fake) sorted(keep func(string) bool) []gate.MemoryEntry {
	var out []gate.MemoryEntry
	for ns, es := range m.data {
		if keep != nil && !keep(ns) {
			continue
		}
		for _, e := range es {
			out = append(out, e)
		}
	}
	slices.SortFunc(out, func(a, b gate.MemoryEntry) int {
		if c := strings.Compare(a.Namespace, b.Namespace); c != 0 {
			return c
		}
		return strings.Compare(a.Key, b.Key)
	})
	return out
}

func (m *fake) ListMemory(_ context.Context, ns string, limit int) ([]gate.MemoryEntry, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.fail != nil {
		return nil, m.fail
	}
	out := m.sorted(func(n string) bool { return ns == "" || n == ns })
	if limit > 0 && len(out) > limit {
		out = out[:limit]
	}
	return out, nil
}

func fakeTerms(s string) []string {
	return strings.FieldsFunc(strings.ToLower(s), func(r rune) bool { return !unicode.IsLetter(r) && !unicode.IsDigit(r) })
}

func (m *fake) SearchMemory(_ context.Context, text string, ns func(string) bool, limit int) ([]gate.MemoryHit, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.fail != nil {
		return nil, m.fail
	}
	if limit <= 0 {
		limit = 10
	}
	allowed := map[string]bool{}
	for n := range m.data {
		allowed[n] = ns == nil || ns(n)
	}
	var hits []gate.MemoryHit
	terms := fakeTerms(text)
	for _, e := range m.sorted(func(n string) bool { return allowed[n] }) {
		score := 0.0
		words := fakeTerms(e.Value)
		for _, q := range terms {
			for _, w := range words {
				if w == q {
					score++
				}
			}
		}
		if score > 0 {
			hits = append(hits, gate.MemoryHit{MemoryEntry: e, Score: score})
		}
	}
	slices.SortStableFunc(hits, func(a, b gate.MemoryHit) int {
		switch {
		case a.Score > b.Score:
			return -1
		case a.Score < b.Score:
			return 1
		}
		return 0
	})
	if len(hits) > limit {
		hits = hits[:limit]
	}
	return hits, nil
}

func (m *fake) value(ns, key string) (string, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	e, ok := m.data[ns][key]
	return e.Value, ok
}

func (m *fake) putCount() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.puts
}

// holds reports whether any stored namespace, key or value contains s.
func (m *fake) holds(s string) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, e := range m.sorted(nil) {
		if strings.Contains(e.Namespace+e.Key+e.Value, s) {
			return true
		}
	}
	return false
}

func memoryCall(t *testing.T, g *gate.Gate, tool, args string) tool.Result {
	t.Helper()
	return tooltest.CallReq(t, g, gate.Request{Tool: tool, Args: json.RawMessage(args), Principal: []string{"test"}, RunID: "run-1"})
}

func writeFiles(t *testing.T, dir string, files map[string]string) {
	t.Helper()
	for name, content := range files {
		p := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func TestMemoryWrite(t *testing.T) {
	const policy = "version: 1\ngrants: [\"memory.write:notes\", \"memory.write:default\", \"memory.read:*\"]\n"
	cases := []struct {
		name, args string
		code       tool.Code
		ns, key    string // where the value must be stored
		stored     string
		warn       string
	}{
		{name: "default namespace", args: `{"key":"k","value":"hello"}`, ns: "default", key: "k", stored: "hello"},
		{name: "named namespace", args: `{"key":"todo","value":"buy milk","namespace":"notes"}`, ns: "notes", key: "todo", stored: "buy milk"},
		{name: "ungranted namespace", args: `{"key":"k","value":"v","namespace":"other"}`, code: tool.CodeCapabilityDenied},
		{name: "nested namespace not granted", args: `{"key":"k","value":"v","namespace":"notes/deep"}`, code: tool.CodeCapabilityDenied},
		{name: "reserved namespace", args: `{"key":"k","value":"v","namespace":"_files/0123"}`, code: tool.CodeInvalidInput},
		{name: "reserved context", args: `{"key":"k","value":"v","namespace":"_context/cli"}`, code: tool.CodeInvalidInput},
		{name: "glob namespace", args: `{"key":"k","value":"v","namespace":"*"}`, code: tool.CodeInvalidInput},
		{name: "dot segment", args: `{"key":"k","value":"v","namespace":"notes/../x"}`, code: tool.CodeInvalidInput},
		{name: "space in namespace", args: `{"key":"k","value":"v","namespace":"my notes"}`, code: tool.CodeInvalidInput},
		{name: "empty namespace", args: `{"key":"k","value":"v","namespace":""}`, code: tool.CodeInvalidInput},
		{name: "secret key", args: fmt.Sprintf(`{"key":"%s","value":"v"}`, tooltest.Canary), code: tool.CodeInvalidInput},
		{name: "control key", args: `{"key":"a\u001b[2Jb","value":"v"}`, code: tool.CodeInvalidInput},
		{name: "missing value", args: `{"key":"k"}`, code: tool.CodeInvalidInput},
		{name: "unknown field", args: `{"key":"k","value":"v","ttl":5}`, code: tool.CodeInvalidInput},
		{name: "too large", args: fmt.Sprintf(`{"key":"k","value":"%s"}`, strings.Repeat("x", maxValueBytes+1)), code: tool.CodeTooLarge},
		{name: "secret value is masked before storing", args: fmt.Sprintf(`{"key":"creds","value":"token %s","namespace":"notes"}`, tooltest.Canary),
			ns: "notes", key: "creds", stored: "token [REDACTED]", warn: "masked"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			mem := newMemoryFake()
			g, audit := tooltest.Gate(t, policy, t.TempDir(), Tools(Config{Memory: mem})...)
			res := memoryCall(t, g, "write_memory", tc.args)
			tooltest.Expect(t, res, tc.code)
			tooltest.AssertNoSecret(t, res, audit, tooltest.Canary)
			if mem.holds(tooltest.Canary) {
				t.Error("the secret reached the store")
			}
			if tc.code != "" {
				if mem.putCount() != 0 {
					t.Errorf("a refused call stored %d entries", mem.putCount())
				}
				return
			}
			if v, ok := mem.value(tc.ns, tc.key); !ok || v != tc.stored {
				t.Errorf("stored %q (%v), want %q", v, ok, tc.stored)
			}
			if !strings.Contains(strings.Join(res.Warnings, " "), tc.warn) {
				t.Errorf("warnings %v, want %q", res.Warnings, tc.warn)
			}
		})
	}
	t.Run("hint names the grant", func(t *testing.T) {
		g, _ := tooltest.Gate(t, policy, t.TempDir(), Tools(Config{Memory: newMemoryFake()})...)
		res := memoryCall(t, g, "write_memory", `{"key":"k","value":"v","namespace":"other"}`)
		if !slices.Contains(res.Error.Missing, "memory.write:other") || !strings.Contains(res.Error.Hint, "needs the grant memory.write:other") {
			t.Errorf("missing %q, hint %q", res.Error.Missing, res.Error.Hint)
		}
	})
	t.Run("overwrite warns", func(t *testing.T) {
		mem := newMemoryFake()
		g, _ := tooltest.Gate(t, policy, t.TempDir(), Tools(Config{Memory: mem})...)
		tooltest.Expect(t, memoryCall(t, g, "write_memory", `{"key":"k","value":"one"}`), "")
		res := memoryCall(t, g, "write_memory", `{"key":"k","value":"two"}`)
		tooltest.Expect(t, res, "")
		var d WriteResult
		json.Unmarshal(res.Data, &d)
		if !d.Overwrote || !strings.Contains(strings.Join(res.Warnings, " "), "overwrites") {
			t.Errorf("data %+v warnings %v", d, res.Warnings)
		}
		if v, _ := mem.value("default", "k"); v != "two" {
			t.Errorf("value %q", v)
		}
	})
	t.Run("dry run", func(t *testing.T) {
		mem := newMemoryFake()
		mem.PutMemory(context.Background(), "notes", "k", "old")
		ws := t.TempDir()
		g, _ := tooltest.Gate(t, policy, ws, Tools(Config{Memory: mem})...)
		before, puts := tooltest.TreeChecksum(t, ws), mem.putCount()
		res := tooltest.CallReq(t, g, gate.Request{Tool: "write_memory", Args: json.RawMessage(`{"key":"k","value":"new","namespace":"notes"}`), Principal: []string{"test"}, DryRun: true})
		tooltest.Expect(t, res, "")
		if !strings.Contains(res.Output, "would replace memory entry notes/k") || !strings.Contains(strings.Join(res.Warnings, " "), "overwrites") {
			t.Errorf("preview %q %v", res.Output, res.Warnings)
		}
		if v, _ := mem.value("notes", "k"); v != "old" || mem.putCount() != puts || tooltest.TreeChecksum(t, ws) != before {
			t.Error("the dry run changed something")
		}
	})
	t.Run("store failure", func(t *testing.T) {
		mem := newMemoryFake()
		mem.fail = errors.New("store is locked")
		g, _ := tooltest.Gate(t, policy, t.TempDir(), Tools(Config{Memory: mem})...)
		tooltest.Expect(t, memoryCall(t, g, "write_memory", `{"key":"k","value":"v"}`), tool.CodeToolError)
	})
	t.Run("no store", func(t *testing.T) {
		g, _ := tooltest.Gate(t, policy, t.TempDir(), Tools(Config{Memory: nil})...)
		tooltest.Expect(t, memoryCall(t, g, "write_memory", `{"key":"k","value":"v"}`), tool.CodeToolError)
	})
}

func queryFixture() *fake {
	mem := newMemoryFake()
	ctx := context.Background()
	mem.PutMemory(ctx, "notes", "a", "the gate checks grants")
	mem.PutMemory(ctx, "notes", "b", "gate gate gate and the audit")
	mem.PutMemory(ctx, "notes/deep", "c", "a nested gate note")
	mem.PutMemory(ctx, "team", "x", "gate for the team")
	mem.PutMemory(ctx, "private", "p", "gate private diary")
	mem.PutMemory(ctx, "_files/0123456789abcdef", "secret.txt", "path: secret.txt\n\ngate gate gate gate file text")
	mem.PutMemory(ctx, "_context/run-9", "text:1", "gate gate gate gate context")
	return mem
}

func TestMemoryQuery(t *testing.T) {
	const policy = "version: 1\ngrants: [\"memory.read:notes\", \"memory.read:notes/**\", \"memory.read:team\"]\n"
	cases := []struct {
		name, args string
		policy     string
		code       tool.Code
		want       []string // namespace/key, in order
		searched   []string
		hidden     int
	}{
		{name: "literal namespace ranked", args: `{"query":"gate","namespace":"notes"}`,
			want: []string{"notes/b", "notes/a"}, searched: []string{"notes"}},
		{name: "no namespace: only granted ones", args: `{"query":"gate"}`,
			want: []string{"notes/b", "notes/a", "notes/deep/c", "team/x"}, searched: []string{"notes", "notes/deep", "team"}, hidden: 1},
		// As in grants, dir/** also matches dir itself.
		{name: "glob", args: `{"query":"gate","namespace":"notes/**"}`,
			want: []string{"notes/b", "notes/a", "notes/deep/c"}, searched: []string{"notes", "notes/deep"}},
		{name: "glob one level", args: `{"query":"gate","namespace":"notes/*"}`,
			want: []string{"notes/deep/c"}, searched: []string{"notes/deep"}},
		{name: "glob star", args: `{"query":"gate","namespace":"t*"}`, want: []string{"team/x"}, searched: []string{"team"}},
		{name: "glob matching nothing", args: `{"query":"gate","namespace":"zzz*"}`, want: []string{}, searched: []string{}},
		{name: "limit", args: `{"query":"gate","limit":1}`, want: []string{"notes/b"}, searched: []string{"notes", "notes/deep", "team"}, hidden: 1},
		{name: "all grants still never reserved", args: `{"query":"gate"}`, policy: "version: 1\ngrants: [\"memory.read:*\"]\n",
			want: []string{"notes/b", "notes/a", "notes/deep/c", "private/p", "team/x"}, searched: []string{"notes", "notes/deep", "private", "team"}},
		{name: "literal ungranted", args: `{"query":"gate","namespace":"private"}`, code: tool.CodeCapabilityDenied},
		{name: "glob only ungranted", args: `{"query":"gate","namespace":"pri*"}`, code: tool.CodeCapabilityDenied},
		{name: "no grants at all", args: `{"query":"gate"}`, policy: "version: 1\n", code: tool.CodeCapabilityDenied},
		{name: "reserved literal", args: `{"query":"gate","namespace":"_files/0123456789abcdef"}`, code: tool.CodeInvalidInput},
		{name: "reserved glob", args: `{"query":"gate","namespace":"_*"}`, code: tool.CodeInvalidInput},
		{name: "bad glob", args: `{"query":"gate","namespace":"notes/[a"}`, code: tool.CodeInvalidInput},
		{name: "blank query", args: `{"query":"  "}`, code: tool.CodeInvalidInput},
		{name: "limit too big", args: `{"query":"gate","limit":1000}`, code: tool.CodeInvalidInput},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p := policy
			if tc.policy != "" {
				p = tc.policy
			}
			g, _ := tooltest.Gate(t, p, t.TempDir(), Tools(Config{Memory: queryFixture()})...)
			res := memoryCall(t, g, "query_memory", tc.args)
			tooltest.Expect(t, res, tc.code)
			if tc.code != "" {
				return
			}
			var d QueryResult
			if err := json.Unmarshal(res.Data, &d); err != nil {
				t.Fatal(err)
			}
			got := []string{}
			for _, h := range d.Results {
				got = append(got, h.Namespace+"/"+h.Key)
			}
			if fmt.Sprint(got) != fmt.Sprint(tc.want) || fmt.Sprint(d.Searched) != fmt.Sprint(tc.searched) || d.Hidden != tc.hidden {
				t.Errorf("got %v searched %v hidden %d; want %v %v %d", got, d.Searched, d.Hidden, tc.want, tc.searched, tc.hidden)
			}
			if strings.Contains(string(res.Data)+res.Output, "file text") || strings.Contains(string(res.Data)+res.Output, "context") {
				t.Error("a reserved namespace leaked into the results")
			}
			if tc.hidden > 0 && len(res.Warnings) == 0 {
				t.Error("no warning about hidden namespaces")
			}
		})
	}
	t.Run("dry run runs read-only", func(t *testing.T) {
		ws := t.TempDir()
		mem := queryFixture()
		g, _ := tooltest.Gate(t, policy, ws, Tools(Config{Memory: mem})...)
		before, puts := tooltest.TreeChecksum(t, ws), mem.putCount()
		res := tooltest.CallReq(t, g, gate.Request{Tool: "query_memory", Args: json.RawMessage(`{"query":"gate"}`), Principal: []string{"test"}, DryRun: true})
		tooltest.Expect(t, res, "")
		if tooltest.TreeChecksum(t, ws) != before || mem.putCount() != puts {
			t.Error("the dry run changed something")
		}
	})
	t.Run("secret in query", func(t *testing.T) {
		g, audit := tooltest.Gate(t, policy, t.TempDir(), Tools(Config{Memory: queryFixture()})...)
		res := memoryCall(t, g, "query_memory", fmt.Sprintf(`{"query":"gate %s"}`, tooltest.Canary))
		tooltest.Expect(t, res, "")
		tooltest.AssertNoSecret(t, res, audit, tooltest.Canary)
	})
	t.Run("store failure", func(t *testing.T) {
		mem := queryFixture()
		mem.fail = errors.New("store is locked")
		g, _ := tooltest.Gate(t, policy, t.TempDir(), Tools(Config{Memory: mem})...)
		tooltest.Expect(t, memoryCall(t, g, "query_memory", `{"query":"gate"}`), tool.CodeToolError)
	})
}

// memoryWorkspace builds a workspace with text, binary, big, hidden and
// secret files, a symlink out of it and a FIFO.
func memoryWorkspace(t *testing.T) (ws, outside string) {
	t.Helper()
	base := t.TempDir()
	ws = filepath.Join(base, "ws")
	outside = filepath.Join(base, "outside")
	writeFiles(t, ws, map[string]string{
		"docs/gate.md":        "# The gate\n\nThe gate checks every grant before a tool runs.\nGate, gate, gate.\n",
		"docs/audit.md":       "# Audit\n\nThe audit log is hash chained and append only.\n",
		"src/main.go":         "package main\n\n// main wires the audit log and the store.\nfunc main() {}\n",
		"secret/keys.txt":     "deploy key " + tooltest.Canary + "\n",
		"big.txt":             strings.Repeat("gate ", 2000),
		".git/config":         "[core]\n\tgate = audit\n",
		".warden/policy.yaml": "version: 1\n",
	})
	writeFiles(t, outside, map[string]string{"secret.txt": "OUTSIDE gate audit secret\n"})
	if err := os.WriteFile(filepath.Join(ws, "bin.dat"), []byte("gate\x00\x01\x02audit"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(outside, "secret.txt"), filepath.Join(ws, "link-out")); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(filepath.Join(ws, "fifo"), 0o644); err != nil {
		t.Fatal(err)
	}
	return ws, outside
}

// later is a clock an hour ahead, so no file counts as just modified.
func later() time.Time { return time.Now().Add(time.Hour) }

func TestMemoryIndexWorkspace(t *testing.T) {
	ctx := context.Background()
	ws, _ := memoryWorkspace(t)
	mem := newMemoryFake()
	opts := &IndexOptions{MaxFileBytes: 4096, Now: later}
	st, err := IndexWorkspace(ctx, mem, ws, opts)
	if err != nil {
		t.Fatal(err)
	}
	// docs/gate.md docs/audit.md src/main.go secret/keys.txt; skipped: big.txt bin.dat link-out fifo.
	if st.Files != 4 || st.Added != 4 || st.Skipped != 4 || st.Removed != 0 || st.Truncated {
		t.Fatalf("first index: %+v", st)
	}
	textNS, stateNS := filesNS(ws)
	if st.Namespace != textNS {
		t.Errorf("namespace %q, want %q", st.Namespace, textNS)
	}
	if v, ok := mem.value(textNS, "docs/gate.md"); !ok || !strings.HasPrefix(v, "path: docs/gate.md\n\n# The gate") {
		t.Errorf("indexed text %q", v)
	}
	for _, p := range []string{".git/config", ".warden/policy.yaml", "bin.dat", "big.txt", "link-out", "fifo"} {
		if _, ok := mem.value(textNS, p); ok {
			t.Errorf("%s was indexed", p)
		}
	}
	if mem.holds(tooltest.Canary) || mem.holds("OUTSIDE") {
		t.Error("a secret or a file outside the workspace reached the index")
	}
	if v, _ := mem.value(textNS, "secret/keys.txt"); !strings.Contains(v, "deploy key [REDACTED]") {
		t.Errorf("secret file indexed as %q", v)
	}

	// Nothing changed: nothing is written.
	puts := mem.putCount()
	st, err = IndexWorkspace(ctx, mem, ws, opts)
	if err != nil {
		t.Fatal(err)
	}
	if st.Files != 4 || st.Unchanged != 4 || st.Added+st.Updated+st.Removed != 0 || mem.putCount() != puts {
		t.Errorf("second index: %+v, %d writes", st, mem.putCount()-puts)
	}

	// One file changed, one deleted, one added.
	writeFiles(t, ws, map[string]string{"docs/audit.md": "# Audit\n\nRewritten: the audit log is verified.\n", "docs/new.md": "new gate doc\n"})
	os.Remove(filepath.Join(ws, "src/main.go"))
	st, err = IndexWorkspace(ctx, mem, ws, opts)
	if err != nil {
		t.Fatal(err)
	}
	if st.Files != 4 || st.Added != 1 || st.Updated != 1 || st.Removed != 1 || st.Unchanged != 2 {
		t.Errorf("third index: %+v", st)
	}
	if v, _ := mem.value(textNS, "docs/audit.md"); !strings.Contains(v, "Rewritten") {
		t.Errorf("updated text %q", v)
	}
	for _, ns := range []string{textNS, stateNS} {
		if _, ok := mem.value(ns, "src/main.go"); ok {
			t.Errorf("deleted file still in %s", ns)
		}
	}

	// A file that became binary is dropped.
	os.WriteFile(filepath.Join(ws, "docs/new.md"), []byte("now\x00binary"), 0o644)
	st, _ = IndexWorkspace(ctx, mem, ws, opts)
	if _, ok := mem.value(textNS, "docs/new.md"); ok || st.Removed != 1 {
		t.Errorf("binary file kept: %+v", st)
	}

	// Max files.
	other := newMemoryFake()
	st, err = IndexWorkspace(ctx, other, ws, &IndexOptions{MaxFiles: 2, MaxFileBytes: 4096})
	if err != nil || st.Files != 2 || !st.Truncated {
		t.Errorf("max files: %+v %v", st, err)
	}

	// Two workspaces never share an index.
	ws2 := t.TempDir()
	writeFiles(t, ws2, map[string]string{"x.md": "gate"})
	st2, err := IndexWorkspace(ctx, mem, ws2, nil)
	if err != nil || st2.Namespace == textNS || st2.Files != 1 {
		t.Errorf("second workspace: %+v %v", st2, err)
	}

	// A cancelled context stops the walk.
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := IndexWorkspace(cctx, newMemoryFake(), ws, nil); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled index: %v", err)
	}
	if _, err := IndexWorkspace(ctx, newMemoryFake(), filepath.Join(ws, "missing"), nil); err == nil {
		t.Error("indexing a missing workspace succeeded")
	}
}

func TestMemoryGetContext(t *testing.T) {
	ctx := context.Background()
	ws, outside := memoryWorkspace(t)
	mem := newMemoryFake()
	if _, err := IndexWorkspace(ctx, mem, ws, &IndexOptions{MaxFileBytes: 4096, Now: later}); err != nil {
		t.Fatal(err)
	}
	const all = "version: 1\ngrants: [\"fs.read:**\"]\n"
	const docs = "version: 1\ngrants: [\"fs.read:docs/**\"]\n"
	cases := []struct {
		name, policy, args string
		code               tool.Code
		first              []string // the first paths, in order
		absent             []string
		hidden             int
		warn               string
	}{
		{name: "by content", policy: all, args: `{"query":"gate grant"}`, first: []string{"docs/gate.md"}},
		{name: "by path", policy: all, args: `{"query":"main"}`, first: []string{"src/main.go"}},
		{name: "target files first", policy: all, args: `{"query":"gate","target_files":["src/main.go"]}`, first: []string{"src/main.go", "docs/gate.md"}},
		{name: "history widens the search", policy: all, args: `{"query":"zzzz","history":"we talked about the append only audit"}`, first: []string{"docs/audit.md"}},
		{name: "grants filter results", policy: docs, args: `{"query":"audit"}`, first: []string{"docs/audit.md"}, absent: []string{"src/main.go"}, hidden: 1, warn: "left out"},
		{name: "no fs grant: nothing returned", policy: "version: 1\n", args: `{"query":"audit"}`, first: []string{}, absent: []string{"docs/audit.md", "src/main.go"}, hidden: 2},
		{name: "missing target warns", policy: all, args: `{"query":"gate","target_files":["docs/nope.md"]}`, first: []string{"docs/gate.md"}, warn: "does not exist"},
		{name: "target not granted", policy: docs, args: `{"query":"gate","target_files":["src/main.go"]}`, code: tool.CodeCapabilityDenied},
		{name: "target with dot-dot", policy: all, args: `{"query":"gate","target_files":["../outside/secret.txt"]}`, code: tool.CodePathEscape},
		{name: "absolute target outside", policy: all, args: fmt.Sprintf(`{"query":"gate","target_files":[%q]}`, filepath.Join(outside, "secret.txt")), code: tool.CodePathEscape},
		{name: "symlink target out", policy: all, args: `{"query":"gate","target_files":["link-out"]}`, code: tool.CodePathEscape},
		{name: "NUL in target", policy: all, args: `{"query":"gate","target_files":["docs/gate.md\u0000x"]}`, code: tool.CodeInvalidInput},
		{name: "blank query", policy: all, args: `{"query":" \n"}`, code: tool.CodeInvalidInput},
		{name: "unknown field", policy: all, args: `{"query":"gate","limit":3}`, code: tool.CodeInvalidInput},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g, _ := tooltest.Gate(t, tc.policy, ws, Tools(Config{Memory: mem})...)
			res := memoryCall(t, g, "get_context", tc.args)
			tooltest.Expect(t, res, tc.code)
			if tc.code != "" {
				return
			}
			var d ContextResult
			if err := json.Unmarshal(res.Data, &d); err != nil {
				t.Fatal(err)
			}
			var paths []string
			if err := json.Unmarshal([]byte(res.Output), &paths); err != nil || fmt.Sprint(paths) != fmt.Sprint(d.FilePaths) {
				t.Errorf("output %q is not the JSON list of file_paths %v", res.Output, d.FilePaths)
			}
			if len(d.FilePaths) < len(tc.first) || fmt.Sprint(d.FilePaths[:len(tc.first)]) != fmt.Sprint(tc.first) {
				t.Errorf("file_paths %v, want first %v", d.FilePaths, tc.first)
			}
			for _, a := range tc.absent {
				if slices.Contains(d.FilePaths, a) {
					t.Errorf("%s returned", a)
				}
			}
			for _, p := range d.FilePaths {
				if strings.HasPrefix(p, ".git") || p == "bin.dat" || p == "link-out" || p == "big.txt" {
					t.Errorf("%s returned", p)
				}
			}
			if d.HiddenFiles != tc.hidden || !strings.Contains(strings.Join(res.Warnings, " "), tc.warn) {
				t.Errorf("hidden %d warnings %v; want %d %q", d.HiddenFiles, res.Warnings, tc.hidden, tc.warn)
			}
			if d.ContextSummary == "" || d.IndexedFiles != 4 {
				t.Errorf("summary %q indexed %d", d.ContextSummary, d.IndexedFiles)
			}
		})
	}
	t.Run("snippet", func(t *testing.T) {
		g, _ := tooltest.Gate(t, all, ws, Tools(Config{Memory: mem})...)
		res := memoryCall(t, g, "get_context", `{"query":"grant"}`)
		var d ContextResult
		json.Unmarshal(res.Data, &d)
		if len(d.Matches) == 0 || d.Matches[0].Snippet != "The gate checks every grant before a tool runs." {
			t.Errorf("matches %+v", d.Matches)
		}
	})
	t.Run("indexed secret stays masked", func(t *testing.T) {
		g, audit := tooltest.Gate(t, all, ws, Tools(Config{Memory: mem})...)
		res := memoryCall(t, g, "get_context", `{"query":"deploy key"}`)
		tooltest.Expect(t, res, "")
		if !strings.Contains(string(res.Data), "secret/keys.txt") {
			t.Errorf("data %s", res.Data)
		}
		tooltest.AssertNoSecret(t, res, audit, tooltest.Canary)
	})
	t.Run("secret in query", func(t *testing.T) {
		g, audit := tooltest.Gate(t, all, ws, Tools(Config{Memory: mem})...)
		res := memoryCall(t, g, "get_context", fmt.Sprintf(`{"query":"gate %s","history":"%s"}`, tooltest.Canary, tooltest.Canary))
		tooltest.Expect(t, res, "")
		tooltest.AssertNoSecret(t, res, audit, tooltest.Canary)
	})
	t.Run("stale and deleted since indexing", func(t *testing.T) {
		ws, _ := memoryWorkspace(t)
		mem := newMemoryFake()
		IndexWorkspace(ctx, mem, ws, &IndexOptions{MaxFileBytes: 4096, Now: later})
		writeFiles(t, ws, map[string]string{"docs/gate.md": "# The gate\n\nchanged gate text, longer than before\n"})
		os.Remove(filepath.Join(ws, "docs/audit.md"))
		g, _ := tooltest.Gate(t, all, ws, Tools(Config{Memory: mem})...)
		res := memoryCall(t, g, "get_context", `{"query":"gate audit"}`)
		tooltest.Expect(t, res, "")
		var d ContextResult
		json.Unmarshal(res.Data, &d)
		if slices.Contains(d.FilePaths, "docs/audit.md") || d.Gone != 1 {
			t.Errorf("deleted file: %+v", d)
		}
		i := slices.Index(d.FilePaths, "docs/gate.md")
		if i < 0 || !d.Matches[i].Stale || !strings.Contains(strings.Join(res.Warnings, " "), "changed since indexing") {
			t.Errorf("stale: %+v %v", d.Matches, res.Warnings)
		}
	})
	t.Run("symlink swapped in after indexing", func(t *testing.T) {
		ws, outside := memoryWorkspace(t)
		mem := newMemoryFake()
		IndexWorkspace(ctx, mem, ws, &IndexOptions{MaxFileBytes: 4096, Now: later})
		os.Remove(filepath.Join(ws, "docs/gate.md"))
		os.Symlink(filepath.Join(outside, "secret.txt"), filepath.Join(ws, "docs/gate.md"))
		g, _ := tooltest.Gate(t, all, ws, Tools(Config{Memory: mem})...)
		res := memoryCall(t, g, "get_context", `{"query":"gate"}`)
		tooltest.Expect(t, res, "")
		if strings.Contains(res.Output, "docs/gate.md") || strings.Contains(string(res.Data), "OUTSIDE") {
			t.Errorf("a path now leading outside was returned: %s", res.Data)
		}
	})
	t.Run("empty index warns", func(t *testing.T) {
		g, _ := tooltest.Gate(t, all, t.TempDir(), Tools(Config{Memory: newMemoryFake()})...)
		res := memoryCall(t, g, "get_context", `{"query":"gate"}`)
		tooltest.Expect(t, res, "")
		if !strings.Contains(strings.Join(res.Warnings, " "), "warden memory index") {
			t.Errorf("warnings %v", res.Warnings)
		}
	})
	t.Run("dry run", func(t *testing.T) {
		g, _ := tooltest.Gate(t, all, ws, Tools(Config{Memory: mem})...)
		before, puts := tooltest.TreeChecksum(t, ws), mem.putCount()
		res := tooltest.CallReq(t, g, gate.Request{Tool: "get_context", Args: json.RawMessage(`{"query":"gate"}`), Principal: []string{"test"}, DryRun: true})
		tooltest.Expect(t, res, "")
		if tooltest.TreeChecksum(t, ws) != before || mem.putCount() != puts {
			t.Error("the dry run changed something")
		}
	})
	t.Run("store failure", func(t *testing.T) {
		bad := newMemoryFake()
		bad.fail = errors.New("store is locked")
		g, _ := tooltest.Gate(t, all, ws, Tools(Config{Memory: bad})...)
		tooltest.Expect(t, memoryCall(t, g, "get_context", `{"query":"gate"}`), tool.CodeToolError)
	})
}

func TestMemoryPrimeClear(t *testing.T) {
	ctx := context.Background()
	const policy = "version: 1\ngrants: [\"fs.read:docs/**\", \"fs.read:secret/**\", \"fs.read:bin.dat\", \"fs.read:big.txt\", \"fs.read:fifo\", \"fs.read:link-out\"]\n"
	cases := []struct {
		name, args string
		code       tool.Code
		keys       []string
		warn       string
	}{
		{name: "files and text", args: `{"files":["docs/gate.md","docs/audit.md"],"text":"remember the gate"}`,
			keys: []string{"file:docs/gate.md", "file:docs/audit.md", "text:"}},
		{name: "text only", args: `{"text":"just a note"}`, keys: []string{"text:"}},
		{name: "same file twice", args: `{"files":["docs/gate.md","./docs/../docs/gate.md"]}`, keys: []string{"file:docs/gate.md"}},
		{name: "big file truncated", args: `{"files":["big.txt"]}`, keys: []string{"file:big.txt"}, warn: "64 KiB"},
		{name: "secret file masked", args: `{"files":["secret/keys.txt"]}`, keys: []string{"file:secret/keys.txt"}, warn: "masked"},
		{name: "secret text masked", args: fmt.Sprintf(`{"text":"token %s"}`, tooltest.Canary), keys: []string{"text:"}, warn: "masked"},
		{name: "nothing", args: `{}`, code: tool.CodeInvalidInput},
		{name: "blank text", args: `{"text":"  "}`, code: tool.CodeInvalidInput},
		{name: "text too large", args: fmt.Sprintf(`{"text":"%s"}`, strings.Repeat("x", primeMaxText+1)), code: tool.CodeTooLarge},
		{name: "ungranted file", args: `{"files":["src/main.go"]}`, code: tool.CodeCapabilityDenied},
		{name: "missing file", args: `{"files":["docs/nope.md"]}`, code: tool.CodeNotFound},
		{name: "atomic: one missing stores nothing", args: `{"files":["docs/gate.md","docs/nope.md"]}`, code: tool.CodeNotFound},
		{name: "binary", args: `{"files":["bin.dat"]}`, code: tool.CodeNotText},
		{name: "directory", args: `{"files":["docs"]}`, code: tool.CodeNotText},
		{name: "fifo does not hang", args: `{"files":["fifo"]}`, code: tool.CodeNotText},
		{name: "dot-dot", args: `{"files":["../outside/secret.txt"]}`, code: tool.CodePathEscape},
		{name: "absolute outside", args: `{"files":["/etc/passwd"]}`, code: tool.CodePathEscape},
		{name: "symlink out", args: `{"files":["link-out"]}`, code: tool.CodePathEscape},
		{name: "long path", args: fmt.Sprintf(`{"files":["docs/%s"]}`, strings.Repeat("a/", 2000)), code: tool.CodeInvalidInput},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ws, _ := memoryWorkspace(t)
			writeFiles(t, ws, map[string]string{"big.txt": strings.Repeat("gate ", 20000)})
			mem := newMemoryFake()
			g, audit := tooltest.Gate(t, policy, ws, Tools(Config{Memory: mem})...)
			res := memoryCall(t, g, "prime_context", tc.args)
			tooltest.Expect(t, res, tc.code)
			tooltest.AssertNoSecret(t, res, audit, tooltest.Canary)
			if mem.holds(tooltest.Canary) || mem.holds("OUTSIDE") {
				t.Error("a secret or an outside file reached the store")
			}
			es, err := RunContext(ctx, mem, "run-1")
			if err != nil {
				t.Fatal(err)
			}
			if tc.code != "" {
				if len(es) != 0 {
					t.Errorf("a failed call stored %d entries", len(es))
				}
				return
			}
			if len(es) != len(tc.keys) {
				t.Fatalf("run context has %d entries, want %d", len(es), len(tc.keys))
			}
			for i, e := range es {
				if !strings.HasPrefix(e.Key, tc.keys[i]) || e.Namespace != "_context/run-1" {
					t.Errorf("entry %d is %s/%s, want key %s…", i, e.Namespace, e.Key, tc.keys[i])
				}
			}
			if strings.HasPrefix(es[0].Key, "file:docs/gate.md") && !strings.HasPrefix(es[0].Value, "# The gate") {
				t.Errorf("primed value %q", es[0].Value)
			}
			if !strings.Contains(strings.Join(res.Warnings, " "), tc.warn) {
				t.Errorf("warnings %v, want %q", res.Warnings, tc.warn)
			}
		})
	}
	t.Run("cli run id, clear, dry runs", func(t *testing.T) {
		ws, _ := memoryWorkspace(t)
		mem := newMemoryFake()
		g, _ := tooltest.Gate(t, policy, ws, Tools(Config{Memory: mem})...)
		call := func(tool, args string, dry bool, run string) tool.Result {
			return tooltest.CallReq(t, g, gate.Request{Tool: tool, Args: json.RawMessage(args), Principal: []string{"test"}, RunID: run, DryRun: dry})
		}
		before := tooltest.TreeChecksum(t, ws)
		res := call("prime_context", `{"files":["docs/gate.md"]}`, true, "")
		tooltest.Expect(t, res, "")
		if !strings.Contains(res.Output, "would prime") || mem.putCount() != 0 {
			t.Errorf("dry run: %q, %d writes", res.Output, mem.putCount())
		}
		tooltest.Expect(t, call("prime_context", `{"files":["docs/gate.md"],"text":"x y"}`, false, ""), "")
		tooltest.Expect(t, call("prime_context", `{"text":"other run"}`, false, "run-2"), "")
		if es, _ := RunContext(ctx, mem, ""); len(es) != 2 || es[0].Namespace != "_context/cli" {
			t.Fatalf("cli context %+v", es)
		}
		res = call("clear_context", `{}`, true, "")
		tooltest.Expect(t, res, "")
		if !strings.Contains(res.Output, "would remove 2") {
			t.Errorf("clear preview %q", res.Output)
		}
		if es, _ := RunContext(ctx, mem, ""); len(es) != 2 {
			t.Error("the clear dry run removed entries")
		}
		res = call("clear_context", `{}`, false, "")
		tooltest.Expect(t, res, "")
		if es, _ := RunContext(ctx, mem, ""); len(es) != 0 {
			t.Errorf("%d entries left after clear", len(es))
		}
		if es, _ := RunContext(ctx, mem, "run-2"); len(es) != 1 {
			t.Error("clear_context touched another run")
		}
		tooltest.Expect(t, call("clear_context", `{"all":true}`, false, ""), tool.CodeInvalidInput)
		if tooltest.TreeChecksum(t, ws) != before {
			t.Error("the workspace changed")
		}
	})
	t.Run("hostile run id", func(t *testing.T) {
		if ns := contextNS("../../_files/x*"); ns != "_context/.._..__files_x_" || strings.Count(ns, "/") != 1 {
			t.Errorf("namespace %q", ns)
		}
	})
	t.Run("store failure", func(t *testing.T) {
		ws, _ := memoryWorkspace(t)
		mem := newMemoryFake()
		mem.fail = errors.New("store is locked")
		g, _ := tooltest.Gate(t, policy, ws, Tools(Config{Memory: mem})...)
		tooltest.Expect(t, memoryCall(t, g, "prime_context", `{"text":"x"}`), tool.CodeToolError)
		tooltest.Expect(t, memoryCall(t, g, "clear_context", `{}`), tool.CodeToolError)
	})
}

// A symlink flipped between a granted file and an ungranted one while
// prime_context runs: whatever the timing, the ungranted content is never
// stored or returned (the gate checks the resolved path, and the file
// actually opened is checked again through its descriptor).
func TestMemoryPrimeSymlinkRace(t *testing.T) {
	ws := t.TempDir()
	writeFiles(t, ws, map[string]string{"pub/ok.txt": "public text\n", "private/secret.txt": "TOPSECRET\n"})
	for _, l := range []struct{ name, target string }{{"pub/.a", "ok.txt"}, {"pub/.b", "../private/secret.txt"}} {
		if err := os.Symlink(l.target, filepath.Join(ws, l.name)); err != nil {
			t.Fatal(err)
		}
	}
	os.Symlink("ok.txt", filepath.Join(ws, "pub/link"))
	mem := newMemoryFake()
	g, _ := tooltest.Gate(t, "version: 1\ngrants: [\"fs.read:pub/**\"]\n", ws, Tools(Config{Memory: mem})...)
	var stop atomic.Bool
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := 0; !stop.Load(); i++ {
			// Atomic swaps: copy a prepared link over pub/link.
			src := "pub/.a"
			if i%2 == 1 {
				src = "pub/.b"
			}
			target, _ := os.Readlink(filepath.Join(ws, src))
			tmp := filepath.Join(ws, fmt.Sprintf("pub/.tmp%d", i%2))
			os.Remove(tmp)
			os.Symlink(target, tmp)
			os.Rename(tmp, filepath.Join(ws, "pub/link"))
		}
	}()
	outcomes := map[string]int{}
	const attempts = 3000
	for range attempts {
		res := memoryCall(t, g, "prime_context", `{"files":["pub/link"]}`)
		if strings.Contains(res.Output+string(res.Data), "TOPSECRET") {
			t.Fatal("the ungranted file's content was returned")
		}
		if res.Error != nil {
			outcomes[string(res.Error.Code)]++
		} else {
			outcomes["ok"]++
		}
	}
	stop.Store(true)
	<-done
	if mem.holds("TOPSECRET") {
		t.Fatal("the ungranted file's content was stored")
	}
	t.Logf("%d attempts: %v", attempts, outcomes)
	if outcomes["ok"] == 0 {
		t.Error("no attempt succeeded; the race test tests nothing")
	}
}

// Every memory tool maps a store that ran out of time to TIMEOUT and any
// other store failure to TOOL_ERROR, each with a hint, and stores nothing.
func TestMemoryStoreErrorCodes(t *testing.T) {
	const policy = "version: 1\ngrants: [\"memory.write:default\", \"memory.read:*\", \"fs.read:**\"]\n"
	calls := []struct{ tool, args string }{
		{"write_memory", `{"key":"k","value":"v"}`},
		{"query_memory", `{"query":"gate"}`},
		{"get_context", `{"query":"gate"}`},
		{"prime_context", `{"text":"remember the gate"}`},
		{"clear_context", `{}`},
	}
	failures := []struct {
		name string
		err  error
		code tool.Code
	}{
		{"deadline", context.DeadlineExceeded, tool.CodeTimeout},
		{"wrapped deadline", fmt.Errorf("sqlite busy: %w", context.DeadlineExceeded), tool.CodeTimeout},
		{"generic", errors.New("store is locked"), tool.CodeToolError},
	}
	for _, c := range calls {
		for _, f := range failures {
			t.Run(c.tool+"/"+f.name, func(t *testing.T) {
				mem := queryFixture()
				puts := mem.putCount()
				mem.fail = f.err
				g, _ := tooltest.Gate(t, policy, t.TempDir(), Tools(Config{Memory: mem})...)
				res := memoryCall(t, g, c.tool, c.args)
				tooltest.Expect(t, res, f.code)
				if !strings.Contains(res.Error.Message, c.tool) {
					t.Errorf("message %q does not name the tool", res.Error.Message)
				}
				if mem.putCount() != puts {
					t.Errorf("a failed call stored %d entries", mem.putCount()-puts)
				}
			})
		}
	}
}
