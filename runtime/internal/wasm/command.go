package wasm

import (
	"bytes"
	"context"
	"errors"
	"time"

	extism "github.com/extism/go-sdk"
	"github.com/tetratelabs/wazero/sys"

	"github.com/wardenrt/warden/runtime/tool"
)

// errOutputLimit is the cause of a command stopped for writing more than
// its output cap.
var errOutputLimit = errors.New("wasm: command output over the limit")

// RunCommand runs a WASI command's _start in a fresh instance (commands
// are never pooled: a command's main runs once per instance) with stdin as
// its stdin, and returns what it wrote to stdout. Stdout is capped at
// Limits.MaxOutput: the command is stopped at the first byte over it
// (WASM_LIMIT). Stderr is captured in CallInfo.Stderr.
//
// A command that ran to its end has CallInfo.Exited set and its exit code
// in CallInfo.ExitCode (returning from _start is exit code 0). Exit 0 is
// success; a non-zero exit is not an error either (err nil, stdout
// returned): the caller decides (it reports TOOL_ERROR with stderr's
// tail). A command that died of a resource limit (a Go guest's "out of
// memory" or stack overflow, whatever its exit code) is WASM_LIMIT; a trap
// is WASM_TRAP, the deadline TIMEOUT; a module with no _start export is
// INVALID_INPUT. o.PoolKey is ignored; o.Config and o.HTTP apply as for
// [Module.Call] (a command may import Extism's host functions).
func (m *Module) RunCommand(ctx context.Context, stdin []byte, o CallOptions) (stdout []byte, info CallInfo, err error) {
	start := time.Now()
	out := &capWriter{max: m.limits.MaxOutput}
	stderr := &capWriter{max: DefaultMaxLog}
	defer func() {
		info.Duration = time.Since(start)
		info.Stderr, info.StderrDropped = stderr.result()
	}()
	if err := refuseWASIOutput(); err != nil {
		return nil, info, err
	}
	m.mu.Lock()
	closed := m.closed
	m.mu.Unlock()
	if closed {
		return nil, info, ErrClosed
	}

	callCtx, cancel := context.WithTimeout(ctx, m.limits.Timeout)
	defer cancel()
	runCtx, stop := context.WithCancelCause(callCtx)
	defer stop(nil)
	out.onDrop = func() { stop(errOutputLimit) }

	sl := &sleeper{}
	sl.bind(runCtx)
	mc := moduleConfig(out, stderr, sl).WithStdin(bytes.NewReader(stdin))
	p, err := m.compiled.Instance(runCtx, extism.PluginInstanceConfig{ModuleConfig: mc})
	if err != nil {
		return nil, info, m.instantiateError(ctx, callCtx, err)
	}
	defer p.Close(context.Background())
	m.prepare(p, stderr, o)
	if !p.FunctionExists("_start") {
		return nil, info, tool.Errorf(tool.CodeInvalidInput, "build it as a WASI command (no -buildmode), or declare the tool's ABI as extism",
			"the module is not a WASI command: it has no _start export")
	}

	// Extism turns proc_exit(0) into success and returns any other exit
	// code as rc with its *sys.ExitError.
	_, _, err = p.CallWithContext(runCtx, "_start", nil)
	info.MemoryBytes = p.Memory().Size()
	if errors.Is(context.Cause(runCtx), errOutputLimit) {
		return nil, info, tool.Errorf(tool.CodeWasmLimit, "raise the tool's max_output_bytes or ask for less",
			"the command wrote more than its output limit of %d bytes to stdout", m.limits.MaxOutput)
	}
	var exit *sys.ExitError
	switch {
	case err == nil:
		info.Exited, info.ExitCode = true, 0
	case ctx.Err() == nil && callCtx.Err() == nil && errors.As(err, &exit):
		info.Exited, info.ExitCode = true, exit.ExitCode()
		log, _ := stderr.result()
		if e := limitError(guestFatal(log), int64(m.limits.MemoryPages)*pageSize); e != nil {
			return nil, info, e
		}
	default:
		return nil, info, m.classify(ctx, callCtx, err, &info, stderr)
	}
	stdout, _ = out.result()
	return stdout, info, nil
}
