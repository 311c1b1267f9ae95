package git

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/wardenrt/warden/builtin/internal/tooltest"
	"github.com/wardenrt/warden/runtime/runtimetest"
)

// BenchmarkGitStatus: git_status through the gate (hardened git, the config
// scan for filter drivers, porcelain v2 parsing, audit in memory) against
// plain `git status --porcelain=v2`, on a repository of 10,000 committed
// files with a few modified and one untracked.
func BenchmarkGitStatus(b *testing.B) {
	ws, err := filepath.EvalSymlinks(b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	tooltest.GitPlain(b, ws, "init", "-q", "-b", "main")
	for d := 0; d < 100; d++ {
		dir := filepath.Join(ws, fmt.Sprintf("d%02d", d))
		if err := os.Mkdir(dir, 0o755); err != nil {
			b.Fatal(err)
		}
		for f := 0; f < 100; f++ {
			if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("f%02d.txt", f)), []byte(fmt.Sprintf("file %d/%d\n", d, f)), 0o644); err != nil {
				b.Fatal(err)
			}
		}
	}
	tooltest.GitPlain(b, ws, "add", "-A")
	tooltest.GitPlain(b, ws, "commit", "-q", "-m", "10,000 files")
	for _, p := range []string{"d00/f00.txt", "d10/f10.txt", "d50/f50.txt", "d99/f99.txt"} {
		runtimetest.WriteFile(b, ws, p, "modified\n")
	}
	runtimetest.WriteFile(b, ws, "untracked.txt", "new\n")
	// Settle the index once, as a user's repository would be.
	tooltest.GitPlain(b, ws, "status", "-s")

	bin := tooltest.GitBinary(b)
	b.Run("git", func(b *testing.B) {
		for b.Loop() {
			cmd := exec.Command(bin, "status", "--porcelain=v2")
			cmd.Dir = ws
			cmd.Env = tooltest.GitPlainEnv()
			if err := cmd.Run(); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("tool", func(b *testing.B) {
		g, _ := newGate(b, policyRead, ws)
		for b.Loop() {
			res := tooltest.Call(b, g, "git_status", `{}`)
			if !res.Success {
				b.Fatal(res.Error)
			}
		}
	})
}
