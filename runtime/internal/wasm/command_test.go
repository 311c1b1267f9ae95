package wasm

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/wardenrt/warden/internal/wasmfixture"
	"github.com/wardenrt/warden/runtime/tool"
)

func compileBytes(t testing.TB, wasm []byte, o CompileOptions) *Module {
	t.Helper()
	m, err := engine(t).Compile(context.Background(), wasm, o)
	if err != nil {
		t.Fatalf("compile: %v", err)
	}
	t.Cleanup(func() { m.Close(context.Background()) })
	return m
}

func TestRunCommandExitCodes(t *testing.T) {
	const timeout = 300 * time.Millisecond
	for _, tt := range []struct {
		name      string
		body      []byte
		maxOutput int
		stdout    string
		exitCode  uint32
		code      tool.Code // "" = success
	}{
		{name: "return", body: cmdReturn},
		{name: "hello", body: cmdHello, stdout: "hello\n"},
		{name: "exit 0", body: cmdExit0},
		{name: "exit 7 after output", body: cmdExit7, stdout: "hello\n", exitCode: 7},
		{name: "trap", body: cmdTrap, code: tool.CodeWasmTrap},
		{name: "loop", body: cmdLoop, code: tool.CodeTimeout},
		{name: "flood", body: cmdFlood, maxOutput: 1000, code: tool.CodeWasmLimit},
		{name: "hello over cap", body: cmdHello, maxOutput: 5, code: tool.CodeWasmLimit},
		{name: "hello at cap", body: cmdHello, maxOutput: 6, stdout: "hello\n"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			m := compileBytes(t, command(tt.body...), CompileOptions{Limits: Limits{Timeout: timeout, MaxOutput: tt.maxOutput}})
			start := time.Now()
			out, info, err := m.RunCommand(context.Background(), nil, CallOptions{})
			took := time.Since(start)
			if took > timeout+deadlineSlack() {
				t.Errorf("took %v, deadline %v", took, timeout)
			}
			if tt.code != "" {
				e := wantCode(t, err, tt.code)
				t.Logf("%v after %v", e, took)
				if out != nil {
					t.Errorf("output %q with an error", out)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if string(out) != tt.stdout || !info.Exited || info.ExitCode != tt.exitCode {
				t.Errorf("stdout %q, exited %v code %d; want %q, code %d", out, info.Exited, info.ExitCode, tt.stdout, tt.exitCode)
			}
		})
	}
}

func TestRunCommandWASIProbe(t *testing.T) {
	m := compileBytes(t, wasmfixture.Bytes(t, "hostile/wasiprobecmd", true), CompileOptions{Limits: Limits{Timeout: 5 * time.Second}})
	in := `{"x":"stdin for the command"}`
	start := time.Now()
	out, info, err := m.RunCommand(context.Background(), []byte(in), CallOptions{})
	if err != nil {
		t.Fatalf("%v (stderr %q)", err, info.Stderr)
	}
	if took := time.Since(start); took > 5*time.Second+deadlineSlack() {
		t.Errorf("took %v", took)
	}
	if !info.Exited || info.ExitCode != 0 {
		t.Errorf("exited %v code %d", info.Exited, info.ExitCode)
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	if !strings.Contains(string(out), stdoutMarker) {
		t.Errorf("stdout marker missing from %q", out)
	}
	if !bytes.Contains(info.Stderr, []byte(stderrMarker)) {
		t.Errorf("stderr marker missing from %q", info.Stderr)
	}
	var r struct {
		Stdin  string      `json:"stdin"`
		Report probeReport `json:"report"`
	}
	if err := json.Unmarshal([]byte(lines[len(lines)-1]), &r); err != nil {
		t.Fatalf("last line %q: %v", lines[len(lines)-1], err)
	}
	if r.Stdin != in {
		t.Errorf("the command read %q on stdin, want %q", r.Stdin, in)
	}
	if len(r.Report.Could) != 0 || !r.Report.RandomDiffers || !r.Report.ClockPlausible {
		t.Errorf("report %+v", r.Report)
	}

	// Its stdout over the cap: WASM_LIMIT.
	m = compileBytes(t, wasmfixture.Bytes(t, "hostile/wasiprobecmd", true), CompileOptions{Limits: Limits{Timeout: 5 * time.Second, MaxOutput: 10}})
	_, _, err = m.RunCommand(context.Background(), []byte(in), CallOptions{})
	wantCode(t, err, tool.CodeWasmLimit)
}

func TestRunCommandRefusals(t *testing.T) {
	ctx := context.Background()
	// An Extism plugin is not a command.
	m := compile(t, "examples/textstats", nil, Limits{})
	_, _, err := m.RunCommand(ctx, nil, CallOptions{})
	wantCode(t, err, tool.CodeInvalidInput)

	// The caller's cancellation is its own error.
	m = compileBytes(t, command(cmdLoop...), CompileOptions{Limits: Limits{Timeout: 5 * time.Second}})
	cctx, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	_, _, err = m.RunCommand(cctx, nil, CallOptions{})
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("cancelled: %v", err)
	}

	t.Setenv(envWASIOutput, "1")
	_, _, err = m.RunCommand(ctx, nil, CallOptions{})
	wantCode(t, err, tool.CodeInternal)
	os.Unsetenv(envWASIOutput)
	m.Close(ctx)
	if _, _, err = m.RunCommand(ctx, nil, CallOptions{}); !errors.Is(err, ErrClosed) {
		t.Errorf("closed module: %v", err)
	}
}

func TestInspect(t *testing.T) {
	ctx := context.Background()
	e := engine(t)
	wasm := fixture(t, "examples/textstats")
	info, err := e.Inspect(ctx, wasm)
	if err != nil {
		t.Fatal(err)
	}
	has := func(list []string, s string) bool {
		for _, x := range list {
			if x == s {
				return true
			}
		}
		return false
	}
	if !has(info.Exports, "call") || !has(info.Exports, "_initialize") || has(info.Exports, "memory") {
		t.Errorf("exports %v", info.Exports)
	}
	if !has(info.Imports, "extism:host/env.input_length") || !has(info.Imports, "wasi_snapshot_preview1.fd_write") {
		t.Errorf("imports %v", info.Imports)
	}
	if info.MemoryMinPages == 0 || info.HasMaxMemory || info.Size != len(wasm) {
		t.Errorf("memory %d..%d (%v), size %d", info.MemoryMinPages, info.MemoryMaxPages, info.HasMaxMemory, info.Size)
	}
	t.Logf("textstats: %d exports, %d imports, %d initial pages", len(info.Exports), len(info.Imports), info.MemoryMinPages)

	m := compile(t, "examples/textstats", nil, Limits{})
	if got := m.Exports(); strings.Join(got, ",") != strings.Join(info.Exports, ",") {
		t.Errorf("Module.Exports %v, Inspect %v", got, info.Exports)
	}

	bad, err := e.Inspect(ctx, fixture(t, "hostile/badimport"))
	if err != nil || !has(bad.Imports, "warden.nonexistent") {
		t.Errorf("badimport: %v %v", bad.Imports, err)
	}

	hand := testModule{
		types:   []testFunc{{}},
		funcs:   []int{0},
		bodies:  [][]byte{nil},
		memory:  []byte{1, 2, 3},
		exports: []testExport{{"run", 0, 0}, {"mem", 2, 0}, {"_start", 0, 0}},
	}.encode()
	info, err = e.Inspect(ctx, hand)
	if err != nil || strings.Join(info.Exports, ",") != "_start,run" || info.Imports != nil ||
		info.MemoryMinPages != 2 || info.MemoryMaxPages != 3 || !info.HasMaxMemory {
		t.Errorf("hand-made module: %+v %v", info, err)
	}

	for name, wasm := range map[string][]byte{
		"garbage":     []byte("not wasm"),
		"bad body":    []byte("\x00asm\x01\x00\x00\x00garbage"),
		"bad version": []byte("\x00asm\x02\x00\x00\x00"),
		"truncated":   hand[:len(hand)-3],
		"overlong":    append(hand[:len(hand):len(hand)], 1, 0xff, 0xff, 0xff, 0xff, 0x7f),
	} {
		if _, err := e.Inspect(ctx, wasm); !errors.Is(err, ErrLoad) {
			t.Errorf("%s: %v", name, err)
		} else {
			t.Logf("%s: %v", name, err)
		}
	}
}
