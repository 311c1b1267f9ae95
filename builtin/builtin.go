// Package builtin is the catalogue of warden's core tools: Core assembles
// every family, each a package of its own under builtin/ (fs, shell, git,
// web, interact, memory, automation, text, ops, system), in one stable
// order. What the families share lives under builtin/internal: the program
// runner (proc), path resolution (fspath), text helpers (textutil) and the
// network guard (netguard).
package builtin

import (
	"context"

	"github.com/wardenrt/warden/builtin/automation"
	"github.com/wardenrt/warden/builtin/fs"
	"github.com/wardenrt/warden/builtin/git"
	"github.com/wardenrt/warden/builtin/interact"
	"github.com/wardenrt/warden/builtin/internal/proc"
	"github.com/wardenrt/warden/builtin/memory"
	"github.com/wardenrt/warden/builtin/ops"
	"github.com/wardenrt/warden/builtin/shell"
	"github.com/wardenrt/warden/builtin/system"
	"github.com/wardenrt/warden/builtin/text"
	"github.com/wardenrt/warden/builtin/web"
	"github.com/wardenrt/warden/runtime/gate"
	"github.com/wardenrt/warden/runtime/tool"
)

// Config is what the core tools need from the program that runs them:
// each family's configuration (the zero value of each is usable; fs and
// shell need none).
type Config struct {
	// System: warden's version, start time and state (get_status).
	System system.Config
	// Git: the git program, its timeout and output cap (default: git
	// from /usr/bin or /bin, 60 s, 1 MiB).
	Git git.Config
	// Web: the search tool's backend.
	Web web.Config
	// Interact: the terminal ask_user asks on.
	Interact interact.Config
	// Memory: the memory store.
	Memory memory.Config
	// Automation: where workflow runs are recorded and scheduled jobs kept.
	Automation automation.Config
	// Text: the model endpoint summarize uses.
	Text text.Config
	// Ops: where modify_config keeps old versions, the redactor that masks
	// them, and where journalctl and systemctl are looked for.
	Ops ops.Config
}

// Core returns every core tool, family by family in a stable order:
// system, fs, shell, git, web, interact, memory, automation, text, ops.
func Core(cfg Config) []tool.Tool {
	var tools []tool.Tool
	tools = append(tools, system.Tools(cfg.System)...)
	tools = append(tools, fs.Tools()...)
	tools = append(tools, shell.Tools()...)
	tools = append(tools, git.Tools(cfg.Git)...)
	tools = append(tools, web.Tools(cfg.Web)...)
	tools = append(tools, interact.Tools(cfg.Interact)...)
	tools = append(tools, memory.Tools(cfg.Memory)...)
	tools = append(tools, automation.Tools(cfg.Automation)...)
	tools = append(tools, text.Tools(cfg.Text)...)
	tools = append(tools, ops.Tools(cfg.Ops)...)
	return tools
}

// SandboxProbe is what ProbeSandbox found.
type SandboxProbe = proc.SandboxProbe

// ProbeSandbox starts programs the way the tools do, to show that the
// sandbox works here (`warden sandbox check`).
func ProbeSandbox(ctx context.Context) SandboxProbe { return proc.ProbeSandbox(ctx) }

// IndexOptions, IndexStats and IndexWorkspace are the memory family's
// workspace index (`warden memory index`).
type (
	IndexOptions = memory.IndexOptions
	IndexStats   = memory.IndexStats
)

// IndexWorkspace indexes the workspace's text files into mem (see
// memory.IndexWorkspace).
func IndexWorkspace(ctx context.Context, mem gate.Memory, workspace string, opts *IndexOptions) (IndexStats, error) {
	return memory.IndexWorkspace(ctx, mem, workspace, opts)
}

// RuntimeState is what get_status reports about warden itself (see
// system.RuntimeState).
type RuntimeState = system.RuntimeState
