package env

import (
	"io"
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/wardenrt/warden/runtime/gate"
	"github.com/wardenrt/warden/runtime/redact"
	"github.com/wardenrt/warden/runtime/tool"
	"github.com/wardenrt/warden/runtime/wasmtool"
	"github.com/wardenrt/warden/store"
)

// What the commands read of their environment, and the few things a front
// end sets in it before anything is built.

// CLI is the command's context: its flags and arguments.
func (e *Env) CLI() *cli.Context { return e.c }

// Home is warden's home directory.
func (e *Env) Home() string { return e.home }

// Workspace is the workspace directory.
func (e *Env) Workspace() string { return e.workspace }

// JSON reports whether --json was given.
func (e *Env) JSON() bool { return e.json }

// Stdin is the command's standard input.
func (e *Env) Stdin() io.Reader { return e.stdin }

// Stdout is the command's standard output.
func (e *Env) Stdout() io.Writer { return e.stdout }

// Stderr is the command's standard error.
func (e *Env) Stderr() io.Writer { return e.stderr }

// Log is the command's log (nil before it is set up; Logger never is).
func (e *Env) Log() *slog.Logger { return e.log }

// Redactor masks the secrets warden knows of.
func (e *Env) Redactor() *redact.Redactor { return e.redactor }

// Store opens the store on first use (store).
func (e *Env) Store() (store.Backend, error) { return e.store() }

// SetStore makes st the store the command uses (nil: the one --store
// names, opened again on next use); the caller closes st.
func (e *Env) SetStore(st store.Backend) { e.st = st }

// Terminal returns stdin when it is a terminal, for prompts; nil otherwise.
func (e *Env) Terminal() *os.File { return e.terminal() }

// WasmStatus is what loading the wasm modules found (Registry).
func (e *Env) WasmStatus() []wasmtool.Status { return e.wasmStatus }

// Approval is the approval mode set with SetApproval, "" for none.
func (e *Env) Approval() tool.ApprovalMode { return e.approval }

// SetApproval overrides the approval mode (mcp serve: never ask on a
// terminal whose stdin is the protocol).
func (e *Env) SetApproval(m tool.ApprovalMode) { e.approval = m }

// SetApprover is asked instead of the terminal in approval mode ask (mcp
// serve: the person behind the MCP client).
func (e *Env) SetApprover(a gate.Approver) { e.approver = a }

// ForHome is an environment outside any command line, on home and
// workspace: no input, its output discarded, and a redactor that masks
// what looks like a secret but knows no literal (tests). Close closes it.
func ForHome(home, workspace string) *Env {
	return &Env{started: time.Now(), stdin: strings.NewReader(""), stderr: io.Discard, redactor: redact.New(), home: home, workspace: workspace}
}
