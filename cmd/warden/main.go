// Command warden is a WebAssembly-extensible agent runtime whose every tool
// call goes through one gate: policy, capabilities, approval and a
// tamper-evident audit log.
package main

import (
	"os"
	"runtime/debug"
	"sync/atomic"

	"github.com/wardenrt/warden/runtime/sandbox"
)

// stoppedCleanly is set by a service (warden daemon) whose signal is its
// normal way to stop, once it has stopped and recorded everything: it then
// exits 0, as a service manager expects.
var stoppedCleanly atomic.Bool

// gcPercent is the garbage collector's target unless GOGC says otherwise: a
// warden command is mostly short-lived and allocates its garbage up front
// (schemas, module bytes), so collecting at the default 100% costs a fresh
// `warden call` of a wasm tool some 15% of its time for little memory.
const gcPercent = 400

func main() {
	// First: warden re-executes itself as the sandbox launcher of the
	// programs it starts; that process never gets past this line.
	if sandbox.Main() {
		return
	}
	if _, set := os.LookupEnv("GOGC"); !set {
		debug.SetGCPercent(gcPercent)
	}
	wasiOutputIgnored = unsetWASIOutput()
	ctx, sigs := watchSignals(os.Stderr)
	code := runContext(ctx, os.Args, os.Stdin, os.Stdout, os.Stderr)
	if sig := sigs.stop(); sig != 0 && !(code == exitOK && stoppedCleanly.Load()) {
		code = 128 + int(sig) // interrupted: 130 for SIGINT, 143 for SIGTERM
	}
	os.Exit(code)
}

// envWASIOutput, when set, makes the Extism SDK send a guest's stdout and
// stderr to the host's terminal; warden's engine refuses to run guests
// while it is set, so main unsets it before anything runs.
const envWASIOutput = "EXTISM_ENABLE_WASI_OUTPUT"

// wasiOutputIgnored records that main unset EXTISM_ENABLE_WASI_OUTPUT, so
// the command's log can say so.
var wasiOutputIgnored bool

// unsetWASIOutput removes EXTISM_ENABLE_WASI_OUTPUT from the environment
// and reports whether it was set.
func unsetWASIOutput() bool {
	if _, set := os.LookupEnv(envWASIOutput); !set {
		return false
	}
	os.Unsetenv(envWASIOutput)
	return true
}
