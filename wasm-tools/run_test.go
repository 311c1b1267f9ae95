package wasmtools_test

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/imports/wasi_snapshot_preview1"
	"github.com/tetratelabs/wazero/sys"

	wasmtools "github.com/wardenrt/warden/wasm-tools"
)

// TestWASIProbeCommandUnderBareWazero runs the wasiprobecmd fixture under
// wazero with WASI and nothing else (no mounts, no env, no args): the probe
// must find nothing it could do, read its stdin, and exit 0. It checks the
// fixture, not warden's host (which adds a real clock and randomness).
func TestWASIProbeCommandUnderBareWazero(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a guest module; skipped with -short")
	}
	root, err := wasmtools.Root()
	if err != nil {
		t.Fatal(err)
	}
	f, _ := wasmtools.Lookup("wasiprobecmd")
	out := filepath.Join(t.TempDir(), "wasiprobecmd.wasm")
	if err := wasmtools.Build(f.Path(root), out, f.Command()); err != nil {
		t.Fatal(err)
	}
	bin, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	rt := wazero.NewRuntimeWithConfig(ctx, wazero.NewRuntimeConfig().WithCloseOnContextDone(true))
	defer rt.Close(ctx)
	wasi_snapshot_preview1.MustInstantiate(ctx, rt)
	var stdout, stderr bytes.Buffer
	cfg := wazero.NewModuleConfig().
		WithStdin(strings.NewReader(`{"echo":"hi"}`)).
		WithStdout(&stdout).WithStderr(&stderr)
	_, err = rt.InstantiateWithConfig(ctx, bin, cfg)
	if ee, ok := err.(*sys.ExitError); ok && ee.ExitCode() != 0 || !ok && err != nil {
		t.Fatalf("run: %v\nstderr: %s", err, stderr.String())
	}
	lines := strings.Split(strings.TrimSpace(stdout.String()), "\n")
	if lines[0] != "WASIPROBE-STDOUT-MARKER" || !strings.Contains(stderr.String(), "WASIPROBE-STDERR-MARKER") {
		t.Errorf("markers: stdout %q, stderr %q", stdout.String(), stderr.String())
	}
	var res struct {
		Stdin  string `json:"stdin"`
		Report struct {
			Could         []string `json:"could"`
			NetDial       struct{ OK bool }
			ReadPasswd    struct{ OK bool } `json:"read_passwd"`
			RandomDiffers bool              `json:"random_differs"`
		} `json:"report"`
	}
	if err := json.Unmarshal([]byte(lines[len(lines)-1]), &res); err != nil {
		t.Fatalf("report %q: %v", lines[len(lines)-1], err)
	}
	if res.Stdin != `{"echo":"hi"}` {
		t.Errorf("stdin = %q", res.Stdin)
	}
	if len(res.Report.Could) != 0 || res.Report.ReadPasswd.OK {
		t.Errorf("a bare WASI guest could: %v", res.Report.Could)
	}
	t.Logf("report: %s", lines[len(lines)-1])
}

// TestWordcountCommand runs the wordcount example (a WASI command) under
// bare wazero: arguments JSON on stdin, result on stdout, exit code 2 and a
// message on stderr for bad arguments.
func TestWordcountCommand(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a guest module; skipped with -short")
	}
	root, err := wasmtools.Root()
	if err != nil {
		t.Fatal(err)
	}
	f, _ := wasmtools.Lookup("wordcount")
	out := filepath.Join(t.TempDir(), "wordcount.wasm")
	if err := wasmtools.Build(f.Path(root), out, f.Command()); err != nil {
		t.Fatal(err)
	}
	bin, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	rt := wazero.NewRuntimeWithConfig(ctx, wazero.NewRuntimeConfig().WithCloseOnContextDone(true))
	defer rt.Close(ctx)
	wasi_snapshot_preview1.MustInstantiate(ctx, rt)
	compiled, err := rt.CompileModule(ctx, bin)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name, stdin    string
		code           uint32
		stdout, stderr string
	}{
		{"counts", `{"text":"one two\nthree"}`, 0, `{"words":3,"lines":2,"bytes":13}` + "\n", ""},
		{"bad input", `{"txt":"x"}`, 2, "", `wordcount: invalid arguments: unknown field "txt"`},
		{"no input", ``, 2, "", `"text" is required`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			cfg := wazero.NewModuleConfig().WithName("").
				WithStdin(strings.NewReader(tc.stdin)).WithStdout(&stdout).WithStderr(&stderr)
			_, err := rt.InstantiateModule(ctx, compiled, cfg)
			var code uint32
			if ee, ok := err.(*sys.ExitError); ok {
				code = ee.ExitCode()
			} else if err != nil {
				t.Fatal(err)
			}
			if code != tc.code || stdout.String() != tc.stdout || !strings.Contains(stderr.String(), tc.stderr) {
				t.Fatalf("exit %d, stdout %q, stderr %q; want %d, %q, stderr containing %q",
					code, stdout.String(), stderr.String(), tc.code, tc.stdout, tc.stderr)
			}
		})
	}
}
