// Package system is the system family: the system tool's read-only
// introspection of the machine and of warden.
package system

import (
	"context"
	"fmt"
	"os"
	goruntime "runtime"
	"strings"
	"time"

	"github.com/wardenrt/warden/runtime/capability"
	"github.com/wardenrt/warden/runtime/tool"
)

// RuntimeState is what get_status reports about warden itself. cmd/warden
// fills it from the store and the registry.
type RuntimeState struct {
	StorePath     string `json:"store_path"`
	StoreBytes    int64  `json:"store_bytes"`
	AuditRecords  uint64 `json:"audit_records"`
	AuditHeadSeq  uint64 `json:"audit_head_seq"`
	AuditHeadHash string `json:"audit_head_hash"`
	ToolsLoaded   int    `json:"tools_loaded"`
	Policy        string `json:"policy"`
}

// System is the `system` tool: side-effect-free
// introspection from syscalls and the Go runtime. It reads no files, starts
// no processes and touches no network.
type System struct {
	Config
}

// Config configures the system tool.
type Config struct {
	// Version is warden's version, reported by get_info.
	Version string
	// State reports warden's own state for get_status; nil leaves it out.
	State func(ctx context.Context) (RuntimeState, error)
	// Started is when this warden process started (for its uptime).
	Started time.Time
}

var _ tool.Typed[Args] = (*System)(nil)

// Tools returns the system family: the system tool, with cfg.
func Tools(cfg Config) []tool.Tool { return []tool.Tool{tool.Adapt[Args](&System{cfg})} }

// Args are the system tool's arguments.
type Args struct {
	Operation string `json:"operation" minLength:"1" maxLength:"128" jsonschema:"get_info (platform, kernel, CPUs, versions) or get_status (warden's state, load, memory, uptime)"`
}

// Spec implements tool.Typed.
func (s *System) Spec() tool.Spec {
	return tool.Spec{
		Name: "system",
		Description: "Read-only system introspection. operation get_info: OS, architecture, kernel release, hostname, CPUs, Go and warden versions. " +
			"operation get_status: warden's state (store, audit head, tools loaded), load average, memory, uptime. Never runs commands: use shell for that.",
		Capabilities: []capability.Kind{capability.SystemInfo},
		ReadOnly:     true,
	}
}

// Needs implements tool.Typed: both operations need system.info; any other
// operation is refused before anything runs.
func (s *System) Needs(c *tool.Call, a *Args) ([]capability.Need, error) {
	switch a.Operation {
	case "get_info", "get_status":
		return []capability.Need{{Kind: capability.SystemInfo}}, nil
	}
	return nil, unsupported(a.Operation)
}

// unsupported explains a refused operation, naming the tool to use instead.
func unsupported(op string) *tool.Error {
	lower := strings.ToLower(op)
	for _, w := range []string{"exec", "command", "run", "shell", "spawn", "process", "script", "kill", "start", "restart"} {
		if strings.Contains(lower, w) {
			return tool.Errorf(tool.CodeOperationNotSupported, "use the shell tool to run commands",
				"system does not support %q: it never executes anything; use the shell tool", op)
		}
	}
	for _, w := range []string{"file", "read", "write", "dir", "list", "path"} {
		if strings.Contains(lower, w) {
			return tool.Errorf(tool.CodeOperationNotSupported, "use fs_read / fs_list for files",
				"system does not support %q: it does no file operations; use the fs tools", op)
		}
	}
	return tool.Errorf(tool.CodeOperationNotSupported, "operations are get_info and get_status; to run a command use shell",
		"system does not support operation %q", op)
}

// Run implements tool.Typed.
func (s *System) Run(ctx context.Context, c *tool.Call, a *Args) tool.Outcome {
	switch a.Operation {
	case "get_info":
		info, err := systemInfo(s.Version)
		if err != nil {
			return tool.Fail(tool.CodeToolError, "", "get_info: %v", err)
		}
		return tool.Outcome{
			Output: fmt.Sprintf("%s/%s, kernel %s, host %s, %d CPUs, %s, warden %s",
				info.OS, info.Arch, info.KernelRelease, info.Hostname, info.CPUs, info.GoVersion, info.WardenVersion),
			Data: info,
		}
	case "get_status":
		st, err := s.status(ctx)
		if err != nil {
			return tool.Fail(tool.CodeToolError, "", "get_status: %v", err)
		}
		host := fmt.Sprintf("load %.2f %.2f %.2f, memory %d/%d MiB free, up %s",
			st.Load[0], st.Load[1], st.Load[2], st.MemFreeBytes>>20, st.MemTotalBytes>>20,
			time.Duration(st.UptimeSeconds)*time.Second)
		if st.Unmeasured != "" {
			host = st.Unmeasured
		}
		return tool.Outcome{
			Output: fmt.Sprintf("%s; audit head #%d, %d tools", host, st.Warden.AuditHeadSeq, st.Warden.ToolsLoaded),
			Data:   st,
		}
	}
	return tool.Outcome{Err: unsupported(a.Operation)}
}

// Info is get_info's data.
type Info struct {
	OS            string `json:"os"`
	Arch          string `json:"arch"`
	KernelName    string `json:"kernel_name"`
	KernelRelease string `json:"kernel_release"`
	KernelVersion string `json:"kernel_version"`
	Machine       string `json:"machine"`
	Hostname      string `json:"hostname"`
	CPUs          int    `json:"cpus"`
	GoVersion     string `json:"go_version"`
	WardenVersion string `json:"warden_version"`
}

func systemInfo(version string) (Info, error) {
	info, err := kernelInfo()
	if err != nil {
		return Info{}, err
	}
	info.OS, info.Arch = goruntime.GOOS, goruntime.GOARCH
	info.CPUs = goruntime.NumCPU()
	info.GoVersion = goruntime.Version()
	info.WardenVersion = version
	return info, nil
}

// Status is get_status's data.
type Status struct {
	State         string     `json:"state"`
	Load          [3]float64 `json:"load_average"`
	MemTotalBytes uint64     `json:"mem_total_bytes"`
	MemFreeBytes  uint64     `json:"mem_free_bytes"`
	UptimeSeconds int64      `json:"uptime_seconds"`
	Procs         uint16     `json:"procs"`
	// Unmeasured says which of the machine's figures this system does not
	// give warden (they are zero then).
	Unmeasured string       `json:"unmeasured,omitempty"`
	Process    ProcessState `json:"process"`
	Warden     RuntimeState `json:"warden"`
}

// ProcessState describes this warden process.
type ProcessState struct {
	PID           int    `json:"pid"`
	Goroutines    int    `json:"goroutines"`
	HeapBytes     uint64 `json:"heap_bytes"`
	UptimeSeconds int64  `json:"uptime_seconds"`
}

func (s *System) status(ctx context.Context) (Status, error) {
	h, err := hostStatus()
	if err != nil {
		return Status{}, err
	}
	var ms goruntime.MemStats
	goruntime.ReadMemStats(&ms)
	st := Status{
		State:         "ok",
		Load:          h.Load,
		MemTotalBytes: h.MemTotalBytes,
		MemFreeBytes:  h.MemFreeBytes,
		UptimeSeconds: h.UptimeSeconds,
		Procs:         h.Procs,
		Unmeasured:    h.Unmeasured,
		Process: ProcessState{
			PID: os.Getpid(), Goroutines: goruntime.NumGoroutine(), HeapBytes: ms.HeapAlloc,
		},
	}
	if !s.Started.IsZero() {
		st.Process.UptimeSeconds = int64(time.Since(s.Started).Seconds())
	}
	if s.State != nil {
		ws, err := s.State(ctx)
		if err != nil {
			st.State = "degraded: " + err.Error()
		}
		st.Warden = ws
	}
	return st, nil
}
