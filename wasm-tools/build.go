// Package wasmtools holds the sources of warden's example wasm tools
// (examples/) and hostile test modules (hostile/), and the helpers that
// build and inspect them: [Build], [Fixtures] and [Inspect]. The helpers are
// native Go (stdlib only) so warden's host tests can build every guest from
// source; nothing here runs inside a guest.
package wasmtools

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
)

// ABI is how warden loads a module (wasm-tools/README.md).
type ABI string

const (
	// Extism is an Extism plugin with a NAME.tool.yaml sidecar; built with
	// -buildmode=c-shared (a reactor: _initialize, exports via
	// //go:wasmexport).
	Extism ABI = "extism"
	// Servlet is an MCP-style servlet exporting describe and call; built
	// like an Extism plugin. Its sidecar is optional (name, abi: servlet,
	// capabilities, limits, config; no input_schema or export).
	Servlet ABI = "servlet"
	// WASICommand is a WASI command (_start = main): arguments JSON on
	// stdin, result on stdout, exit code 0 = success.
	WASICommand ABI = "wasi-command"
)

// Fixture is one guest module built from this directory.
type Fixture struct {
	// Name is the module's base name: Name.wasm, Name.tool.yaml.
	Name string
	// Dir is the package directory, slash-separated, relative to [Root].
	Dir string
	ABI ABI
	// Hostile is true for the modules under hostile/.
	Hostile bool
	// Published is true for the modules under compat/, which reproduce
	// modules published for other Extism hosts: no warden sidecar, open
	// schemas, names and conventions of their own.
	Published bool
	// Exports are the functions the module must export (besides memory
	// and _initialize or _start).
	Exports []string
	// Imports are "module.name" imports the module must have.
	Imports []string
	// Sidecar is the sidecar file in Dir, Name.tool.yaml ("" only for a
	// servlet without one).
	Sidecar string
}

// Command reports whether the fixture is built as a WASI command.
func (f Fixture) Command() bool { return f.ABI == WASICommand }

// Path returns the fixture's package directory under root.
func (f Fixture) Path(root string) string { return filepath.Join(root, filepath.FromSlash(f.Dir)) }

// wardenCall is what a guest using the helper (warden/) imports from
// warden's host module: warden_call and its buffer path.
var wardenCall = []string{"warden.warden_call", "warden.warden_buffer", "warden.warden_call_buffer"}

// Fixtures lists every example and hostile module. The malformed-module
// fixture is not here: it is garbage bytes written by the host test.
var Fixtures = []Fixture{
	{Name: "textstats", Dir: "examples/textstats", ABI: Extism, Exports: []string{"call"}, Sidecar: "textstats.tool.yaml"},
	{Name: "fetch", Dir: "examples/fetch", ABI: Extism, Exports: []string{"call"}, Imports: []string{"extism:host/env.http_request"}, Sidecar: "fetch.tool.yaml"},
	{Name: "notes", Dir: "examples/notes", ABI: Extism, Exports: []string{"call"}, Imports: wardenCall, Sidecar: "notes.tool.yaml"},
	{Name: "jsontools", Dir: "examples/jsontools", ABI: Servlet, Exports: []string{"describe", "call"}},
	{Name: "webtools", Dir: "examples/webtools", ABI: Servlet, Exports: []string{"describe", "call"}, Imports: []string{"extism:host/env.http_request"}, Sidecar: "webtools.tool.yaml"},
	{Name: "wordcount", Dir: "examples/wordcount", ABI: WASICommand, Sidecar: "wordcount.tool.yaml"},

	{Name: "loop", Dir: "hostile/loop", ABI: Extism, Hostile: true, Exports: []string{"call"}, Sidecar: "loop.tool.yaml"},
	{Name: "hostloop", Dir: "hostile/hostloop", ABI: Extism, Hostile: true, Exports: []string{"call", "times"}, Imports: wardenCall, Sidecar: "hostloop.tool.yaml"},
	{Name: "membomb", Dir: "hostile/membomb", ABI: Extism, Hostile: true, Exports: []string{"call"}, Sidecar: "membomb.tool.yaml"},
	{Name: "recursion", Dir: "hostile/recursion", ABI: Extism, Hostile: true, Exports: []string{"call"}, Sidecar: "recursion.tool.yaml"},
	{Name: "badimport", Dir: "hostile/badimport", ABI: Extism, Hostile: true, Exports: []string{"call"}, Imports: []string{"warden.nonexistent"}, Sidecar: "badimport.tool.yaml"},
	{Name: "wasiprobe", Dir: "hostile/wasiprobe", ABI: Extism, Hostile: true, Exports: []string{"call"}, Sidecar: "wasiprobe.tool.yaml"},
	{Name: "wasiprobecmd", Dir: "hostile/wasiprobecmd", ABI: WASICommand, Hostile: true, Sidecar: "wasiprobecmd.tool.yaml"},
	{Name: "hugeoutput", Dir: "hostile/hugeoutput", ABI: Extism, Hostile: true, Exports: []string{"call", "stdout"}, Sidecar: "hugeoutput.tool.yaml"},
	{Name: "bsky", Dir: "compat/bsky", ABI: Servlet, Published: true, Exports: []string{"describe", "call"}},
	{Name: "weather", Dir: "compat/weather", ABI: Servlet, Published: true, Exports: []string{"describe", "call"},
		Imports: []string{"extism:host/env.config_get", "extism:host/env.http_request", "extism:host/env.http_status_code", "extism:host/env.http_headers", "extism:host/env.log_info"}},
	{Name: "count_vowels", Dir: "compat/count_vowels", ABI: Extism, Published: true, Exports: []string{"count_vowels"},
		Imports: []string{"extism:host/env.config_get", "extism:host/env.var_get", "extism:host/env.var_set"}},
	{Name: "abiprobe", Dir: "compat/abiprobe", ABI: Servlet, Published: true, Exports: []string{"describe", "call"}, Imports: abiprobeImports},
	{Name: "trap", Dir: "hostile/trap", ABI: Extism, Hostile: true, Exports: []string{"call", "unreachable", "nilderef", "exit"}, Sidecar: "trap.tool.yaml"},
}

// abiprobeImports are the Extism kernel and WASI functions published
// plugins import, every one of which compat/abiprobe imports and calls.
var abiprobeImports = func() []string {
	var out []string
	for _, f := range []string{"alloc", "free", "length", "length_unsafe", "load_u8", "load_u64", "store_u8", "store_u64",
		"input_length", "input_offset", "input_load_u8", "input_load_u64", "output_set", "output_length", "output_offset",
		"error_set", "error_get", "reset", "memory_bytes", "config_get", "var_get", "var_set",
		"http_request", "http_status_code", "http_headers", "get_log_level",
		"log_trace", "log_debug", "log_info", "log_warn", "log_error"} {
		out = append(out, "extism:host/env."+f)
	}
	for _, f := range []string{"args_sizes_get", "args_get", "environ_sizes_get", "environ_get", "clock_time_get", "random_get",
		"fd_write", "proc_exit", "sched_yield", "poll_oneoff"} {
		out = append(out, "wasi_snapshot_preview1."+f)
	}
	return out
}()

// Lookup returns the fixture named name.
func Lookup(name string) (Fixture, bool) {
	for _, f := range Fixtures {
		if f.Name == name {
			return f, true
		}
	}
	return Fixture{}, false
}

// Root returns the directory of the wasm-tools module, found from this
// source file's path. It needs the path recorded at build time, so it
// fails in a binary built with -trimpath.
func Root() (string, error) {
	_, file, _, ok := runtime.Caller(0)
	if !ok || !filepath.IsAbs(file) {
		return "", errors.New("wasmtools: cannot locate the wasm-tools sources (built with -trimpath?)")
	}
	return filepath.Dir(file), nil
}

// Build compiles the Go main package in dir for GOOS=wasip1 GOARCH=wasm
// into out, with -trimpath: as a WASI command (_start) when commandABI is
// true, else with -buildmode=c-shared (an Extism plugin or servlet). It runs
// `go build` in dir, so dir's own go.mod (wasm-tools/go.mod for the
// fixtures) decides the dependencies; go.work is ignored.
func Build(dir, out string, commandABI bool) error {
	absOut, err := filepath.Abs(out)
	if err != nil {
		return err
	}
	args := []string{"build", "-trimpath"}
	if !commandABI {
		args = append(args, "-buildmode=c-shared")
	}
	args = append(args, "-o", absOut, ".")
	cmd := exec.Command(goTool(), args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GOOS=wasip1", "GOARCH=wasm", "CGO_ENABLED=0", "GOWORK=off")
	if b, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("wasmtools: go %v in %s: %w\n%s", args, dir, err, b)
	}
	return nil
}

// goTool is the go command of the toolchain running this code when it can
// be found, else "go" from PATH.
func goTool() string {
	if p, err := exec.LookPath("go"); err == nil {
		return p
	}
	return "go"
}
