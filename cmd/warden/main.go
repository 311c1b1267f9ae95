// Command warden is a WebAssembly-extensible agent runtime whose every tool
// call goes through one gate: policy, capabilities, approval and a
// tamper-evident audit log.
package main

import (
	"os"
	"runtime/debug"

	"github.com/wardenrt/warden/cmd/warden/internal/env"
	"github.com/wardenrt/warden/cmd/warden/internal/jobs"
	"github.com/wardenrt/warden/runtime/sandbox"
)

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
	env.IgnoreWASIOutput()
	ctx, sigs := watchSignals(os.Stderr)
	code := runContext(ctx, os.Args, os.Stdin, os.Stdout, os.Stderr)
	if sig := sigs.stop(); sig != 0 && !(code == env.ExitOK && jobs.StoppedCleanly.Load()) {
		code = 128 + int(sig) // interrupted: 130 for SIGINT, 143 for SIGTERM
	}
	os.Exit(code)
}
