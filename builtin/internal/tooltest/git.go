package tooltest

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/wardenrt/warden/runtime/runtimetest"
)

// GitPlainEnv is the environment of the fixture's own git commands: no
// system or global config (this machine's ~/.gitconfig stays out), and a
// committer identity for fixture commits only.
func GitPlainEnv() []string {
	return []string{
		"PATH=/usr/bin:/bin", "HOME=/nonexistent", "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null",
		"GIT_AUTHOR_NAME=Fixture", "GIT_AUTHOR_EMAIL=fixture@example.com",
		"GIT_COMMITTER_NAME=Fixture", "GIT_COMMITTER_EMAIL=fixture@example.com",
		"GIT_AUTHOR_DATE=2024-01-02T03:04:05Z", "GIT_COMMITTER_DATE=2024-01-02T03:04:05Z",
	}
}

// GitBinary is the real git, found where the git tools look for it by
// default (/usr/bin, then /bin; never through PATH, which a hostile test
// may change). The test is skipped when there is none.
func GitBinary(t testing.TB) string {
	t.Helper()
	for _, dir := range []string{"/usr/bin", "/bin"} {
		p := filepath.Join(dir, "git")
		if st, err := os.Stat(p); err == nil && !st.IsDir() && st.Mode()&0o111 != 0 {
			return p
		}
	}
	t.Skip("git is not installed")
	return ""
}

// GitPlain runs the real git, unhardened, in dir (fixture setup and the
// hostile suites' proof that a planted program does run without warden).
func GitPlain(t testing.TB, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command(GitBinary(t), args...)
	cmd.Dir = dir
	cmd.Env = GitPlainEnv()
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

// GitFixture makes a repository with two commits on main and the identity
// in its own config (which is what git_commit uses).
func GitFixture(t testing.TB) string {
	t.Helper()
	ws := WS(t)
	GitPlain(t, ws, "init", "-q", "-b", "main")
	GitPlain(t, ws, "config", "user.name", "Repo User")
	GitPlain(t, ws, "config", "user.email", "repo@example.com")
	runtimetest.WriteFile(t, ws, "a.txt", "one\ntwo\nthree\n")
	runtimetest.WriteFile(t, ws, "dir/b.txt", "bee\n")
	runtimetest.WriteFile(t, ws, ".gitignore", "*.log\n")
	GitPlain(t, ws, "add", "-A")
	GitPlain(t, ws, "commit", "-q", "-m", "first")
	runtimetest.WriteFile(t, ws, "a.txt", "one\ntwo\nthree\nfour\n")
	GitPlain(t, ws, "commit", "-q", "-am", "second: add four")
	return ws
}
