package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/wardenrt/warden/cmd/warden/internal/env"
	"github.com/wardenrt/warden/internal/wasmfixture"
	"github.com/wardenrt/warden/store"
)

// runCLI runs warden in-process with the given home and workspace.
func runCLI(t *testing.T, home string, args ...string) (int, string, string) {
	t.Helper()
	var out, errb bytes.Buffer
	argv := append([]string{"warden", "--home", home, "--workspace", t.TempDir()}, args...)
	code := run(argv, strings.NewReader(""), &out, &errb)
	return code, out.String(), errb.String()
}

// TestSecretsNeverReachDisk passes secrets through every kind of call that
// records its arguments and checks the raw bytes of everything under home:
// the database, the anchor and the logs.
func TestSecretsNeverReachDisk(t *testing.T) {
	secrets := []string{
		"sk-proj-Zq3xT9vLmN2pR7sK4wY8aB1cD5eF6gH0",
		"ghp_0123456789abcdefghijABCDEFGHIJ012345",
		"AKIAIOSFODNN7EXAMPLE",
		"xoxb-123456789012-1234567890123-AbCdEfGhIjKlMnOpQrStUvWx",
		"eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U",
	}
	home := t.TempDir()
	for _, s := range secrets {
		// Refused for an unknown field, but its arguments are recorded.
		runCLI(t, home, "call", "system", "--args", `{"operation":"get_info","key":"`+s+`"}`)
		// Undecodable arguments are recorded as text.
		runCLI(t, home, "call", "system", "--args", `{"operation": "`+s)
		// An unknown tool.
		runCLI(t, home, "call", "no_such_tool", "--args", `{"token":"`+s+`"}`)
		// A memory value and key.
		if code, _, e := runCLI(t, home, "memory", "put", "note", "the key is "+s); code != 0 {
			t.Fatalf("memory put: %s", e)
		}
		runCLI(t, home, "memory", "put", "--ns", "k", "password="+s, "x")
		// Logged at debug level to stderr and the file.
		runCLI(t, home, "--log-level", "debug", "policy", "explain", "system", "--args", `{"operation":"`+s+`"}`)
	}
	if code, _, e := runCLI(t, home, "audit", "verify"); code != 0 {
		t.Fatalf("audit verify: %s", e)
	}
	var files int
	err := filepath.WalkDir(home, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		files++
		for _, s := range secrets {
			if n := bytes.Count(data, []byte(s)); n != 0 {
				t.Errorf("%s holds the secret %q %d times", p, s[:8]+"…", n)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if files < 3 {
		t.Fatalf("expected the database, the anchor and a log file, found %d files", files)
	}
}

// TestStoreLockedExit: while another holder has the store, commands fail
// with STORE_LOCKED and exit 75 within the lock timeout, and work again once
// it is released.
func TestStoreLockedExit(t *testing.T) {
	home := t.TempDir()
	if code, _, e := runCLI(t, home, "call", "system", "-a", "operation=get_info"); code != 0 {
		t.Fatal(e)
	}
	holder, err := store.Open(filepath.Join(home, "warden.db"), &store.Options{Linger: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := holder.ListAudit(context.Background(), store.AuditFilter{Limit: 1}); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 5; i++ {
		start := time.Now()
		code, _, e := runCLI(t, home, "--lock-timeout", "100ms", "audit", "ls")
		if code != env.ExitLocked || !strings.HasPrefix(e, "warden: STORE_LOCKED: ") || !strings.Contains(e, "retry") {
			t.Fatalf("attempt %d: exit %d, stderr %q", i, code, e)
		}
		if d := time.Since(start); d > time.Second {
			t.Fatalf("attempt %d took %v with a 100ms lock timeout", i, d)
		}
	}
	if err := holder.Close(); err != nil {
		t.Fatal(err)
	}
	if code, out, e := runCLI(t, home, "audit", "ls"); code != 0 || !strings.Contains(out, "system") {
		t.Fatalf("after release: %d %s %s", code, out, e)
	}
}

// TestToolsJSONMatchesRegistry: `warden tools --json` lists every registered
// tool, wasm tools included, with exactly the registry's input schema.
func TestToolsJSONMatchesRegistry(t *testing.T) {
	home := t.TempDir()
	wasmTools := 0
	if !testing.Short() {
		for _, dir := range []string{"examples/textstats", "examples/jsontools"} {
			if code, _, e := runCLI(t, home, "tool", "install", wasmfixture.Stage(t, dir, "", false)); code != 0 {
				t.Fatalf("install %s: %s", dir, e)
			}
		}
		wasmTools = 3
	}
	code, out, errs := runCLI(t, home, "tools", "--json")
	if code != 0 {
		t.Fatal(errs)
	}
	var listed []struct {
		Name        string          `json:"name"`
		InputSchema json.RawMessage `json:"input_schema"`
	}
	if err := json.Unmarshal([]byte(out), &listed); err != nil {
		t.Fatal(err)
	}
	e := env.ForHome(home, t.TempDir())
	defer e.Close()
	reg, err := e.Registry()
	if err != nil {
		t.Fatal(err)
	}
	specs := reg.Specs()
	if len(listed) != len(specs) || len(specs) < 29+wasmTools {
		t.Fatalf("tools --json lists %d tools, the registry has %d", len(listed), len(specs))
	}
	wasm := 0
	for _, s := range specs {
		if s.Wasm != "" {
			wasm++
		}
	}
	if wasm != wasmTools {
		t.Fatalf("the registry has %d wasm tools, want %d", wasm, wasmTools)
	}
	for i, s := range specs {
		var a, b bytes.Buffer
		if err := json.Compact(&a, listed[i].InputSchema); err != nil {
			t.Fatal(err)
		}
		if err := json.Compact(&b, s.InputSchema); err != nil {
			t.Fatal(err)
		}
		if listed[i].Name != s.Name || a.String() != b.String() {
			t.Errorf("tool %d: listed %s with %s, registry has %s with %s", i, listed[i].Name, a.String(), s.Name, b.String())
		}
	}
}
