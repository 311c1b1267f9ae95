package gitcfg

import (
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/wardenrt/warden/builtin/internal/proc"
	"github.com/wardenrt/warden/runtime/sandbox"
	"github.com/wardenrt/warden/runtime/tool"
)

// maxList caps what git may print of a configuration.
const maxList = 4 << 20

// Reader lists, with git, the configuration of the repository git finds
// from Dir, the way a git started there would see it.
type Reader struct {
	Git string   // the git program
	Dir string   // where git starts: the workspace
	Env []string // git's environment, without GIT_DIR
	// Box is git's sandbox: it should read what the programs read, and
	// write nothing.
	Box        sandbox.Spec
	RequireBox bool
	Hint       string // the hint of a refusal
}

// Repository finds the repository git finds from Dir and lists its
// configuration (ListRepository): Dir/.git when git takes it for a
// repository (one git process), else whatever git discovers — a repository
// above Dir, Dir itself as a bare one. "" and no error: git finds none, or
// cannot read its configuration, which a git started there cannot either.
func (r Reader) Repository(ctx context.Context) (string, []Entry, *tool.Error) {
	dotgit := filepath.Join(r.Dir, ".git")
	if _, err := os.Lstat(dotgit); err == nil {
		entries, ok, e := r.ListRepository(ctx, dotgit)
		if e != nil || ok {
			return dotgit, entries, e
		}
	}
	out, _, code, e := r.run(ctx, "", "rev-parse", "--absolute-git-dir")
	if e != nil || code != 0 {
		return "", nil, e
	}
	gitDir := strings.TrimSuffix(string(out), "\n")
	if !filepath.IsAbs(gitDir) || strings.Contains(gitDir, "\n") {
		return "", nil, tool.Errorf(tool.CodePolicyDenied, r.Hint, "git reported the repository at %q", gitDir)
	}
	entries, ok, e := r.ListRepository(ctx, gitDir)
	if e != nil || !ok {
		return "", nil, e
	}
	return gitDir, entries, nil
}

// ListRepository lists the configuration of the repository at gitDir: its
// local scope and, when the repository has one, its worktree scope, each
// with what it includes. false: git could not — gitDir is not a
// repository (git config --local fails, where a plain listing with
// GIT_DIR would read whatever config file lies there), or its
// configuration cannot be read.
func (r Reader) ListRepository(ctx context.Context, gitDir string) ([]Entry, bool, *tool.Error) {
	entries, ok, e := r.listScope(ctx, gitDir, "local")
	if e != nil || !ok {
		return nil, false, e
	}
	if slices.ContainsFunc(entries, func(en Entry) bool {
		return en.Key == "extensions.worktreeconfig" && !slices.Contains([]string{"false", "no", "off", "0"}, strings.ToLower(en.Value))
	}) {
		more, ok, e := r.listScope(ctx, gitDir, "worktree")
		if e != nil || !ok {
			return nil, false, e
		}
		entries = append(entries, more...)
	}
	return entries, true, nil
}

// listScope lists one scope of the configuration of the repository at
// gitDir, with what it includes.
func (r Reader) listScope(ctx context.Context, gitDir, scope string) ([]Entry, bool, *tool.Error) {
	f := Format{Scope: true, Origin: true, Only: scope}
	out, msg, code, e := r.run(ctx, gitDir, f.Args()...)
	if e == nil && code != 0 && strings.Contains(msg, "show-scope") {
		// git before 2.26 does not tell scopes: the one asked for is the
		// repository's (an unknown scope counts as the repository's).
		f.Scope = false
		out, _, code, e = r.run(ctx, gitDir, f.Args()...)
	}
	if e != nil || code != 0 {
		return nil, false, e
	}
	entries, err := f.Parse(out)
	if err != nil {
		return nil, false, tool.Errorf(tool.CodePolicyDenied, r.Hint, "the repository's git configuration could not be read: %v", err)
	}
	return entries, true, nil
}

// run runs git with args (and GIT_DIR=gitDir when set) and returns what
// it printed and its exit status; an error is a refusal.
func (r Reader) run(ctx context.Context, gitDir string, args ...string) ([]byte, string, int, *tool.Error) {
	stdout := &proc.CappedBuffer{Max: maxList}
	msg, code, e := r.runTo(ctx, gitDir, stdout, args...)
	if e == nil && stdout.Truncated() {
		return nil, "", 0, tool.Errorf(tool.CodePolicyDenied, r.Hint, "the repository's git configuration could not be read: git printed more than %d bytes", maxList)
	}
	return stdout.Bytes(), msg, code, e
}

// runTo runs git with args (and GIT_DIR=gitDir when set), its output going
// to stdout, and returns what it wrote on stderr and its exit status; an
// error is a refusal.
func (r Reader) runTo(ctx context.Context, gitDir string, stdout io.Writer, args ...string) (string, int, *tool.Error) {
	env := r.Env
	if gitDir != "" {
		env = append(slices.Clone(env), "GIT_DIR="+gitDir)
	}
	stderr := &proc.CappedBuffer{Max: 4096}
	code, err := proc.Run(ctx, proc.Spec{Path: r.Git, Args: append([]string{"git"}, args...), Dir: r.Dir, Env: env,
		Stdout: stdout, Stderr: stderr, Box: r.Box, RequireBox: r.RequireBox})
	switch {
	case errors.Is(err, proc.ErrSandboxRequired):
		e := proc.SandboxRequiredError(err)
		return "", 0, tool.Errorf(e.Code, e.Hint, "git, to read the repository's configuration, was not started: %s", e.Message)
	case errors.Is(err, proc.ErrKilled):
		return "", 0, tool.Errorf(tool.CodeCommandTimeout, "raise timeout_ms, or use the git tools",
			"reading the repository's git configuration did not finish before the deadline (or the call was cancelled)")
	case err != nil:
		return "", 0, tool.Errorf(tool.CodePolicyDenied, r.Hint, "the repository's git configuration could not be read: %v", err)
	}
	return strings.TrimSpace(stderr.String()), code, nil
}
