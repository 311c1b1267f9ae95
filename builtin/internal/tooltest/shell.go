package tooltest

import (
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"

	"github.com/wardenrt/warden/runtime/gate"
	"github.com/wardenrt/warden/runtime/runtimetest"
	"github.com/wardenrt/warden/runtime/tool"
)

// ShellGate builds a gate over ws with sh (the shell tool), the given
// grants and the default policy's rule for shell (approval, given
// automatically).
func ShellGate(t testing.TB, sh tool.Tool, ws string, grants ...string) (*gate.Gate, *runtimetest.Audit) {
	t.Helper()
	var b strings.Builder
	b.WriteString("version: 1\ngrants: [")
	for i, g := range grants {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "%q", g)
	}
	b.WriteString("]\nrules:\n  - { tool: shell, action: allow, require_approval: true }\n")
	return Gate(t, b.String(), ws, sh)
}

// ShellDo calls the shell tool with args (a map or a struct).
func ShellDo(t testing.TB, g *gate.Gate, args any) tool.Result {
	t.Helper()
	return Call(t, g, "shell", JSON(t, args))
}

// ProcsWith lists the live processes ("pid: argv") whose command line
// contains s. Zombies have an empty command line: they do not count.
func ProcsWith(s string) []string {
	ents, _ := os.ReadDir("/proc")
	var out []string
	for _, e := range ents {
		if _, err := strconv.Atoi(e.Name()); err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/cmdline")
		if err != nil || !strings.Contains(string(b), s) {
			continue
		}
		out = append(out, e.Name()+": "+strings.ReplaceAll(strings.TrimRight(string(b), "\x00"), "\x00", " "))
	}
	return out
}

// GitInit makes ws a git repository (with the test's own git).
func GitInit(t testing.TB, ws string) {
	t.Helper()
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("git is not installed")
	}
	cmd := exec.Command("git", "init", "-q", ws)
	cmd.Env = append(os.Environ(), "GIT_CONFIG_NOSYSTEM=1")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("git init: %v %s", err, out)
	}
}
