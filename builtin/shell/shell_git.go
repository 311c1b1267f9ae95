package shell

// git's configuration, for git started from the shell. The hardening
// (shell_guard.go) turns off at command scope the programs any
// configuration may name under a fixed key (core.fsmonitor, the pager, …).
// Drivers are named by the repository itself — [filter "x"] clean = …,
// with *.txt filter=x in .gitattributes — so before a command whose
// programs may run git, warden lists the configuration of the repository
// git finds from the workspace, the way that git would see it, and turns
// off every program the repository's own configuration (local and worktree
// scopes, with what they include) names (gitcfg.Overrides). The user's own
// configuration (~/.gitconfig: a git-lfs filter) is left alone.
//
// This holds because the configuration cannot change under the command:
// the workspace's .git is read-only to its programs (proc.ProtectedPaths)
// and warden's interpreter never writes into it. A configuration file the
// command could write or create — an include of a file of the working
// tree, the config of a workspace laid out as a bare repository — could
// name a driver after warden has read it: it refuses the call, before
// anything runs.

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/wardenrt/warden/builtin/internal/gitcfg"
	"github.com/wardenrt/warden/runtime/capability"
	"github.com/wardenrt/warden/runtime/sandbox"
	"github.com/wardenrt/warden/runtime/tool"
)

// gitHint is the hint of a refusal of git's configuration.
const gitHint = "use the git tools (git_status, git_diff, …), which read the repository without its programs, " +
	"or run the command without granting git (or a program that may run it)"

// gitHardening returns what every program of the call gets last: the
// hardening, its command-scope settings merged with those that turn off
// the programs the repository's configuration names. It lists that
// configuration only when the call's programs may run git — git is on the
// PATH and the sandbox lets them execute it (an exec grant that resolves
// to git, exec:*, or no Landlock to hold exec grants) — and git may find a
// repository from the workspace. A refusal is the error.
func (st *run) gitHardening(ctx context.Context) ([]string, *tool.Error) {
	git := st.lookPath("git")
	if git == "" || !st.grantsExec() || !repositoryNear(st.ws) {
		return hardening, nil
	}
	box, _, err := st.sandbox()
	if err != nil || !gitRunnable(box, git) {
		// A sandbox that cannot be made starts no program: start says why.
		return hardening, nil
	}
	gitDir, entries, e := st.gitReader(box, git).Repository(ctx)
	if e != nil || gitDir == "" {
		return hardening, e
	}
	includes, err := gitcfg.Includes(entries, st.base["HOME"])
	if err != nil {
		return nil, tool.Errorf(tool.CodePolicyDenied, gitHint, "the repository's git configuration has an include warden cannot check: %v", err)
	}
	// The files the configuration is read from: its own (even missing:
	// they could be created; a linked worktree's .git file names its own,
	// which are among the origins) and those it includes.
	var files []string
	if fi, err := os.Stat(gitDir); err == nil && fi.IsDir() {
		files = append(files, filepath.Join(gitDir, "config"), filepath.Join(gitDir, "config.worktree"))
	}
	for _, en := range entries {
		if f, ok := strings.CutPrefix(en.Origin, "file:"); ok && en.Repository() && filepath.IsAbs(f) && !slices.Contains(files, f) {
			files = append(files, f)
		}
	}
	for _, in := range includes {
		files = append(files, in.Path)
	}
	for _, f := range files {
		if p, why := st.changeable(box, f); why != "" {
			name := filepath.Clean(f)
			if p != name {
				name += " (through " + p + ")"
			}
			return nil, tool.Errorf(tool.CodePolicyDenied, gitHint+"; or remove the include, or move the file where the command cannot write",
				"the git configuration of the repository %s reads %s, which %s: it could name a program for git to run after warden has read the configuration, so the command is not started",
				gitDir, name, why)
		}
	}
	return hardeningWith(gitcfg.Overrides(entries, gitcfg.Repository)), nil
}

// repositoryNear reports whether git may find a repository from ws: ws or
// a directory above it holds .git, or HEAD (a bare repository's).
func repositoryNear(ws string) bool {
	for d := ws; ; d = filepath.Dir(d) {
		for _, n := range []string{".git", "HEAD"} {
			if _, err := os.Lstat(filepath.Join(d, n)); err == nil {
				return true
			}
		}
		if d == filepath.Dir(d) {
			return false
		}
	}
}

// grantsExec reports whether the call may start any program at all.
func (st *run) grantsExec() bool {
	return slices.ContainsFunc(st.grants.Grants(), func(g capability.Grant) bool { return g.Kind() == capability.Exec })
}

// gitRunnable reports whether a program in box may execute git.
func gitRunnable(box sandbox.Spec, git string) bool {
	if box.ExecAny || sandbox.Detect().ABI == 0 {
		return true
	}
	real, err := filepath.EvalSymlinks(git)
	if err != nil {
		return false
	}
	return slices.ContainsFunc(box.Exec, func(e string) bool { return within(e, real) })
}

// gitReader lists the configuration of the repository git finds from the
// workspace as the call's programs would see it: in a sandbox that reads
// what theirs reads and writes nothing, with the HOME they see.
func (st *run) gitReader(box sandbox.Spec, git string) gitcfg.Reader {
	env := append([]string{"PATH=" + st.path, "LC_ALL=C"}, hardening...)
	for _, k := range []string{"HOME", "XDG_CONFIG_HOME"} {
		if v, ok := st.base[k]; ok {
			env = append(env, k+"="+v)
		}
	}
	return gitcfg.Reader{Git: git, Dir: st.ws, Env: env, RequireBox: st.needBox, Hint: gitHint,
		Box: sandbox.Spec{Read: append(slices.Clone(box.Read), box.Write...), Hide: box.Hide, Limits: box.Limits}}
}

// changeable reports whether this call could change the file p names:
// whether one of the paths deciding it (gitcfg.Chain: its symlinks, the
// file itself, or where it would be created) is one warden's interpreter
// may write (fs.write grants, but for .git, .warden and protect: paths)
// or its programs may (their sandbox's writable paths but the protected
// ones, which below sandbox level full programs can change too: see
// docs/sandbox.md). It returns that path and why.
func (st *run) changeable(box sandbox.Spec, p string) (string, string) {
	chain, err := gitcfg.Chain(p)
	if err != nil {
		return p, "warden cannot resolve: " + err.Error()
	}
	for _, c := range chain {
		_, prot := st.rtCall.Protect.Match(st.ws, c)
		if st.grants.Allows(capability.Need{Kind: capability.FSWrite, Resource: c}) && !protected(st.ws, c) && !prot {
			return c, "the command may write or create"
		}
		if slices.ContainsFunc(box.Write, func(w string) bool { return within(w, c) }) &&
			!slices.ContainsFunc(box.Protect, func(r string) bool { return within(r, c) }) {
			return c, "the command's programs may write or create"
		}
	}
	return "", ""
}
