package gitcfg

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/wardenrt/warden/runtime/sandbox"
	"github.com/wardenrt/warden/runtime/tool"
)

// Hardening are set at command scope, above every configuration file, for
// git started by a tool's programs (the shell's): no fsmonitor, no hooks,
// cat as pager, no credential helper (an empty credential.helper empties
// the list, a repository's credential.<url>.helper too) or askpass program,
// no ext:: transport, no program listing the refs of alternates (git
// reports it cannot run "" and goes without them), the programs git runs
// for ssh and for signatures at git's defaults, and no signature shown by
// log unless asked for. core.gitProxy is first-come, so the command line
// cannot override a repository's: GIT_PROXY_COMMAND="" in the environment
// does (git reads it before any configuration).
var Hardening = []Pair{
	{"core.fsmonitor", "false"}, {"core.hooksPath", "/dev/null"}, {"core.pager", "cat"},
	{"credential.helper", ""}, {"core.askPass", ""}, {"protocol.ext.allow", "never"},
	{"core.sshCommand", "ssh"}, {"core.alternateRefsCommand", ""},
	{"gpg.program", "gpg"}, {"gpg.openpgp.program", "gpg"}, {"gpg.x509.program", "gpgsm"}, {"gpg.ssh.program", "ssh-keygen"},
	{"log.showSignature", "false"},
}

// NoSubmodules are set at command scope for git started from the shell:
// git never starts git inside a submodule by itself — for a status, a
// diff's submodule section (diff.submodule=diff, which a repository's own
// configuration may set, enters submodules found in any tree of the
// history), a fetch, a push — because it names the submodule's repository
// explicitly, and git then uses its configuration without the ownership
// check SafeOnly relies on. (The options that ask for it are refused by
// the shell's argument guards; git status still looks inside the
// submodules the index records, which the shell refuses instead.)
var NoSubmodules = []Pair{
	{"diff.submodule", "log"}, {"submodule.recurse", "false"}, {"fetch.recurseSubmodules", "false"},
	{"push.recurseSubmodules", "no"}, {"status.submoduleSummary", "false"},
}

// Programs are the programs of a tool call that may start git (the
// shell's), as Settings reads the repository for them.
type Programs struct {
	Git  string // the git they would run (found on their PATH)
	Dir  string // the workspace, where they start
	Path string // their PATH
	// Vars are the variables warden gives them (git gets HOME and
	// XDG_CONFIG_HOME), Hardening what it adds last.
	Vars      map[string]string
	Hardening []string
	Box       sandbox.Spec // their sandbox
	// RequireBox refuses to start git below a full sandbox.
	RequireBox bool
	// Writable reports whether warden itself, for the call (the shell's
	// redirections), may write or create a path.
	Writable func(path string) bool
	Hint     string // the hint of a refusal
}

// RepositoryNear reports whether git may find a repository from dir: dir
// or a directory above it holds .git, or HEAD (a bare repository's).
func RepositoryNear(dir string) bool {
	for d := dir; ; d = filepath.Dir(d) {
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

// Runnable reports whether the programs may execute git: exec:*, git
// among their executables, or no Landlock to hold exec grants.
func (p Programs) Runnable() bool {
	if p.Box.ExecAny || sandbox.Detect().ABI == 0 {
		return true
	}
	real, err := filepath.EvalSymlinks(p.Git)
	if err != nil {
		return false
	}
	return slices.ContainsFunc(p.Box.Exec, func(e string) bool { return within(e, real) })
}

// Settings lists, with git, the configuration of the repository git finds
// from Dir — in a sandbox that reads what the programs' reads and writes
// nothing — and returns the settings that turn off every program the
// repository's own configuration names (Overrides, Repository); nil when
// there is none. A configuration file the call could change — one its
// programs or warden may write or create (Changeable), among the
// repository's own config files, those its configuration includes, and
// the paths leading to them — could name a driver after the listing: it
// is refused. With the settings come where git, discovering the
// repository, will find it (Found.Safe) and the repository's gitlinks.
func (p Programs) Settings(ctx context.Context) (Found, *tool.Error) {
	// git finds the repository as the programs' git would, but before
	// it is known to be safe (SafeOnly).
	env := []string{"PATH=" + p.Path, "LC_ALL=C"}
	for _, kv := range p.Hardening {
		if !strings.HasPrefix(kv, "GIT_TEST_ASSUME_DIFFERENT_OWNER=") {
			env = append(env, kv)
		}
	}
	for _, k := range []string{"HOME", "XDG_CONFIG_HOME"} {
		if v, ok := p.Vars[k]; ok {
			env = append(env, k+"="+v)
		}
	}
	r := Reader{Git: p.Git, Dir: p.Dir, Env: env, RequireBox: p.RequireBox, Hint: p.Hint,
		Box: sandbox.Spec{Read: append(slices.Clone(p.Box.Read), p.Box.Write...), Hide: p.Box.Hide, Limits: p.Box.Limits}}
	gitDir, entries, e := r.Repository(ctx)
	if e != nil || gitDir == "" {
		return Found{}, e
	}
	includes, err := Includes(entries, p.Vars["HOME"])
	if err != nil {
		return Found{}, tool.Errorf(tool.CodePolicyDenied, p.Hint, "the repository's git configuration has an include warden cannot check: %v", err)
	}
	// Its own files, even missing (they could be created; a linked
	// worktree's, named by its .git file, are among the origins), and
	// those it includes.
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
		if c, why := p.Changeable(f); why != "" {
			name := filepath.Clean(f)
			if c != name {
				name += " (through " + c + ")"
			}
			return Found{}, tool.Errorf(tool.CodePolicyDenied, p.Hint+"; or remove the include, or move the file where the command cannot write",
				"the git configuration of the repository %s reads %s, which %s: it could name a program for git to run after warden has read the configuration, so the command is not started",
				gitDir, name, why)
		}
	}
	if real, ok := dotGitTarget(gitDir); ok && real != "" {
		gitDir = real // a linked worktree's .git file: the directory it names
	}
	links, e := r.Gitlinks(ctx, gitDir)
	if e != nil {
		return Found{}, e
	}
	return Found{Pairs: Overrides(entries, Repository), Safe: safeDirs(p.Dir, gitDir), Gitlinks: links}, nil
}

// Found is what Settings found of the repository.
type Found struct {
	// Pairs turn off the programs its configuration names.
	Pairs []Pair
	// Safe are the paths git names it by when it checks, on discovering
	// a repository, that it may use it (safe.directory): its work tree
	// (the directory holding its .git) and its git directory, resolved.
	Safe []string
	// Gitlinks are the paths its index records as gitlinks.
	Gitlinks []string
}

// SafeOnly are the environment and command-scope settings that make git
// use no repository it discovers but those named in safe (Found.Safe):
// git then takes every repository for another user's
// (GIT_TEST_ASSUME_DIFFERENT_OWNER, which git has read since 2.35.2),
// and safe.directory, emptied first, lists only these. A repository named
// explicitly (GIT_DIR, --git-dir) is not checked by git — the shell's
// guards refuse both — nor is a submodule git starts itself
// (Found.Gitlinks).
func SafeOnly(safe []string) (string, []Pair) {
	pairs := []Pair{{"safe.directory", ""}}
	for _, s := range safe {
		pairs = append(pairs, Pair{"safe.directory", s})
	}
	return "GIT_TEST_ASSUME_DIFFERENT_OWNER=1", pairs
}

// safeDirs are the names git checks a repository by when it discovers it
// from dir: the work tree (a directory at or above dir holding a .git
// that leads to gitDir) and gitDir itself (a bare repository), with
// symbolic links resolved as git's own getcwd resolves them.
func safeDirs(dir, gitDir string) []string {
	var out []string
	add := func(p string) {
		if r, err := filepath.EvalSymlinks(p); err == nil && !slices.Contains(out, r) {
			out = append(out, r)
		}
	}
	add(gitDir)
	want, err := filepath.EvalSymlinks(gitDir)
	if err != nil {
		return out
	}
	for d := dir; ; d = filepath.Dir(d) {
		if target, ok := dotGitTarget(filepath.Join(d, ".git")); ok && target == want {
			add(d)
		}
		if d == filepath.Dir(d) {
			return out
		}
	}
}

// dotGitTarget resolves a .git entry: a directory, or a file saying
// "gitdir: <path>".
func dotGitTarget(dotgit string) (string, bool) {
	fi, err := os.Stat(dotgit)
	if err != nil {
		return "", false
	}
	p := dotgit
	if !fi.IsDir() {
		if !fi.Mode().IsRegular() || fi.Size() > 4096 { // git reads no other
			return "", true
		}
		b, err := os.ReadFile(dotgit)
		rest, ok := strings.CutPrefix(string(b), "gitdir: ")
		if err != nil || !ok {
			return "", true
		}
		p = strings.TrimRight(rest, "\r\n")
		if !filepath.IsAbs(p) {
			p = filepath.Join(filepath.Dir(dotgit), p)
		}
	}
	r, err := filepath.EvalSymlinks(p)
	return r, err == nil
}

// Changeable reports whether the call could change the file path names:
// whether one of the paths deciding it (Chain: its symlinks, the file
// itself, or where it would be created) is one warden may write (Writable)
// or the programs may — their sandbox's writable paths but the protected
// ones (which below sandbox level full programs can change too, as
// docs/sandbox.md says). It returns that path and why.
func (p Programs) Changeable(path string) (string, string) {
	chain, err := Chain(path)
	if err != nil {
		return path, "warden cannot resolve: " + err.Error()
	}
	for _, c := range chain {
		if p.Writable != nil && p.Writable(c) {
			return c, "the command may write or create"
		}
		if slices.ContainsFunc(p.Box.Write, func(w string) bool { return within(w, c) }) &&
			!slices.ContainsFunc(p.Box.Protect, func(r string) bool { return within(r, c) }) {
			return c, "the command's programs may write or create"
		}
	}
	return "", ""
}

// within reports whether p is dir or inside it (both absolute, clean).
func within(dir, p string) bool {
	return p == dir || dir == "/" || strings.HasPrefix(p, dir+"/")
}
