package main

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/wardenrt/warden/cmd/warden/internal/env"
	"github.com/wardenrt/warden/internal/wasmfixture"
	"github.com/wardenrt/warden/store"
)

// TestWASIOutputNeverReachesTerminal: with EXTISM_ENABLE_WASI_OUTPUT set in
// warden's environment, what a guest writes to its stdout and stderr still
// goes to warden's log, never to the terminal; warden says once that it
// ignored the variable, and the call works.
func TestWASIOutputNeverReachesTerminal(t *testing.T) {
	home := t.TempDir()
	probe := wasmfixture.Stage(t, "hostile/wasiprobe", "", false)
	if code, _, e := runCLI(t, home, "tool", "install", probe); code != 0 {
		t.Fatalf("install wasiprobe: %s", e)
	}
	// hugeoutput's export stdout writes to WASI stdout; a sidecar that
	// calls it with 256 KiB.
	huge := wasmfixture.Stage(t, "hostile/hugeoutput", "", false)
	sc := filepath.Join(filepath.Dir(huge), "hugeoutput.tool.yaml")
	b, err := os.ReadFile(sc)
	if err != nil {
		t.Fatal(err)
	}
	b = bytes.Replace(b, []byte("export: call"), []byte("export: stdout"), 1)
	b = append(b, []byte("config:\n  bytes: \"262144\"\n")...)
	if err := os.WriteFile(sc, b, 0o600); err != nil {
		t.Fatal(err)
	}
	if code, _, e := runCLI(t, home, "tool", "install", huge); code != 0 {
		t.Fatalf("install hugeoutput: %s", e)
	}

	warden, err := exec.LookPath("warden") // this test binary as warden (TestMain)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		tool, want string
		leak       []string
	}{
		{"wasiprobe", `"stdout_write"`, []string{"WASIPROBE-STDOUT-MARKER", "WASIPROBE-STDERR-MARKER"}},
		{"hugeoutput", "wrote to stdout", []string{"BBBBBBBB"}},
	} {
		t.Run(tc.tool, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			cmd := exec.Command(warden, "--home", home, "--workspace", t.TempDir(), "call", tc.tool, "--args", "{}")
			cmd.Env = append(os.Environ(), "EXTISM_ENABLE_WASI_OUTPUT=1")
			cmd.Stdout, cmd.Stderr = &stdout, &stderr
			if err := cmd.Run(); err != nil {
				t.Fatalf("%v\nstdout: %s\nstderr: %s", err, stdout.String(), stderr.String())
			}
			if !strings.Contains(stdout.String(), tc.want) || !strings.Contains(stdout.String(), `"success": true`) {
				t.Fatalf("stdout: %s", stdout.String())
			}
			for _, m := range tc.leak {
				if strings.Contains(stdout.String(), m) || strings.Contains(stderr.String(), m) {
					t.Errorf("the guest's output %q reached the terminal\nstdout: %.2000s\nstderr: %.2000s", m, stdout.String(), stderr.String())
				}
			}
			if !strings.Contains(stderr.String(), "EXTISM_ENABLE_WASI_OUTPUT is ignored") {
				t.Errorf("no word that EXTISM_ENABLE_WASI_OUTPUT was ignored; stderr: %s", stderr.String())
			}
			// Captured into warden's log instead.
			logs, _ := filepath.Glob(filepath.Join(home, "logs", "*.log"))
			var all []byte
			for _, l := range logs {
				b, _ := os.ReadFile(l)
				all = append(all, b...)
			}
			if !bytes.Contains(all, []byte(tc.leak[0])) {
				t.Errorf("the guest's output %q is not in warden's log", tc.leak[0])
			}
		})
	}
}

// TestWasmStartupFailures: an unsafe compilation cache leaves warden with
// its core tools (one warning) while `warden tool` commands refuse with
// what to do; a locked store fails even `warden tools` once modules need
// their pins read.
func TestWasmStartupFailures(t *testing.T) {
	home := t.TempDir()
	if code, _, e := runCLI(t, home, "tool", "install", wasmfixture.Stage(t, "examples/textstats", "", false)); code != 0 {
		t.Fatalf("install: %s", e)
	}
	cache := filepath.Join(home, "cache")
	if err := os.Chmod(cache, 0o777); err != nil {
		t.Fatal(err)
	}
	code, out, errs := runCLI(t, home, "call", "system", "-a", "operation=get_info")
	if code != 0 || !strings.Contains(errs, "wasm tools not loaded") || !strings.Contains(errs, "chmod go-w") {
		t.Fatalf("core call with an unsafe cache: exit %d\n%s\n%s", code, out, errs)
	}
	if code, out, _ := runCLI(t, home, "call", "textstats", "-a", "text=hi"); code != env.ExitFailed || !strings.Contains(out, "UNKNOWN_TOOL") {
		t.Fatalf("wasm call with an unsafe cache: exit %d\n%s", code, out)
	}
	if code, _, errs := runCLI(t, home, "tool", "ls"); code != env.ExitFailed || !strings.HasPrefix(errs, "warden: INTERNAL: ") || !strings.Contains(errs, "chmod go-w") {
		t.Fatalf("tool ls with an unsafe cache: exit %d\n%s", code, errs)
	}
	if err := os.Chmod(cache, 0o700); err != nil {
		t.Fatal(err)
	}
	if code, out, errs := runCLI(t, home, "call", "textstats", "-a", "text=hi"); code != 0 || errs != "" {
		t.Fatalf("after chmod 700: exit %d\n%s\n%s", code, out, errs)
	}

	holder, err := store.Open(filepath.Join(home, "warden.db"), &store.Options{Linger: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	defer holder.Close()
	if _, err := holder.ListPins(context.Background()); err != nil {
		t.Fatal(err)
	}
	if code, _, errs := runCLI(t, home, "--lock-timeout", "100ms", "tools"); code != env.ExitLocked || !strings.HasPrefix(errs, "warden: STORE_LOCKED: ") {
		t.Fatalf("tools with the store locked: exit %d\n%s", code, errs)
	}
}
