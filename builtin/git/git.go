// Package git is the git family: git_status, git_diff, git_show, git_branches,
// git_apply_patch and git_commit. Every tool shells out to the real git
// binary through proc.Run, on the workspace's own repository, with git's
// configuration hardened so that nothing in the repository — .git/config,
// .gitattributes, hooks, include files — can make git start a program or
// reach the network. See hardenArgs and baseEnv for the list and the
// reasons.
package git

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/wardenrt/warden/builtin/internal/fspath"
	"github.com/wardenrt/warden/builtin/internal/gitcfg"
	"github.com/wardenrt/warden/builtin/internal/proc"
	"github.com/wardenrt/warden/runtime/capability"
	"github.com/wardenrt/warden/runtime/sandbox"
	"github.com/wardenrt/warden/runtime/tool"
)

// Config configures the git tools. Every zero field means the default.
type Config struct {
	// Binary is the absolute path of the git program. "" looks for git in
	// /usr/bin, then /bin — never in the caller's PATH or the workspace.
	Binary string
	// Timeout bounds one tool call, all the git processes it starts
	// together (default 60 s). Past it the call fails with COMMAND_TIMEOUT
	// and git's process group is killed.
	Timeout time.Duration
	// MaxOutput caps the text of a diff or show kept for the result
	// (default 1 MiB); longer output is cut and marked truncated.
	MaxOutput int
}

// Defaults of Config.
const (
	defaultTimeout   = 60 * time.Second
	defaultMaxOutput = 1 << 20
	// maxParse caps the machine-readable output git may give one call
	// (status, numstat, for-each-ref) before it is cut and marked truncated.
	maxParse = 16 << 20
	// maxStderr caps what is kept of git's error output.
	maxStderr = 16 << 10
	// maxEntries caps the entries listed in a result's data.
	maxEntries = 5000
)

// Tools returns the six git tools, sharing one configuration.
func Tools(cfg Config) []tool.Tool {
	g := &runner{o: cfg}
	if g.o.Timeout <= 0 {
		g.o.Timeout = defaultTimeout
	}
	if g.o.MaxOutput <= 0 {
		g.o.MaxOutput = defaultMaxOutput
	}
	return []tool.Tool{
		tool.Adapt[statusArgs](&statusTool{g}),
		tool.Adapt[diffArgs](&diffTool{g}),
		tool.Adapt[showArgs](&showTool{g}),
		tool.Adapt[branchesArgs](&branchesTool{g}),
		tool.Adapt[applyPatchArgs](&applyPatchTool{g}),
		tool.Adapt[commitArgs](&commitTool{g}),
	}
}

var (
	_ tool.Typed[statusArgs]              = (*statusTool)(nil)
	_ tool.Typed[diffArgs]                = (*diffTool)(nil)
	_ tool.Typed[showArgs]                = (*showTool)(nil)
	_ tool.Typed[branchesArgs]            = (*branchesTool)(nil)
	_ tool.Typed[applyPatchArgs]          = (*applyPatchTool)(nil)
	_ tool.TypedPreviewer[applyPatchArgs] = (*applyPatchTool)(nil)
	_ tool.TypedSinker[applyPatchArgs]    = (*applyPatchTool)(nil)
	_ tool.Typed[commitArgs]              = (*commitTool)(nil)
	_ tool.TypedPreviewer[commitArgs]     = (*commitTool)(nil)
)

// runner is what the six tools share.
type runner struct {
	o Config
}

// gitPath is the fixed PATH git (and anything it might start) sees.
const gitPath = "/usr/bin:/bin"

// binary returns the git program to start.
func (g *runner) binary() (string, *tool.Error) {
	if g.o.Binary != "" {
		if !filepath.IsAbs(g.o.Binary) {
			return "", tool.Errorf(tool.CodeCommandNotFound, "configure the git tools with the absolute path of git",
				"git binary %q is not an absolute path", g.o.Binary)
		}
		if st, err := os.Stat(g.o.Binary); err != nil || st.IsDir() || st.Mode()&0o111 == 0 {
			return "", tool.Errorf(tool.CodeCommandNotFound, "install git, or configure the git tools with its absolute path",
				"git binary %s is not an executable file", g.o.Binary)
		}
		return g.o.Binary, nil
	}
	for _, dir := range filepath.SplitList(gitPath) {
		p := filepath.Join(dir, "git")
		if st, err := os.Stat(p); err == nil && !st.IsDir() && st.Mode()&0o111 != 0 {
			return p, nil
		}
	}
	return "", tool.Errorf(tool.CodeCommandNotFound, "install git (e.g. apt-get install git)", "git is not installed in %s", gitPath)
}

// hardenArgs go before every git subcommand. Command-line configuration
// outranks every configuration file, including the repository's own
// .git/config (which warden treats as attacker-controlled: it arrives with a
// copied or unpacked repository, and a tool or a person may have written it).
//
//   - core.fsmonitor: a program git runs on status, diff, commit -a.
//   - core.hooksPath=/dev/null: no hook runs (pre-/post-commit,
//     post-index-change, reference-transaction, …); /dev/null/<hook> never
//     exists, whatever .git/hooks holds.
//   - core.pager, --no-pager: no pager, whatever pager.* says.
//   - core.editor, core.askPass, core.sshCommand, gpg.program: never run.
//   - core.attributesFile, core.excludesFile, diff.orderFile, mailmap: no
//     file named by the repository's config is read (it could be a FIFO or
//     /dev/zero).
//   - diff.submodule, diff.ignoreSubmodules, status.submoduleSummary,
//     submodule.recurse: git never starts itself inside a submodule (whose
//     own config this call has not vetted); submodule dirtiness is not
//     reported.
//   - protocol.allow=never (and GIT_ALLOW_PROTOCOL=""): no transport, so a
//     partial clone's lazy fetch cannot run remote.*.uploadpack or ssh.
//   - log.showSignature, commit.gpgSign, tag.gpgSign: no gpg.
//   - gc.auto=0, maintenance.auto=false: commit starts no background gc.
//   - diff.autoRefreshIndex=false: git diff never rewrites the index (it
//     would, optional locks or not), so reads change nothing under .git.
//   - color.ui=false: parseable output.
//   - safe.bareRepository=explicit: discovery never takes the workspace
//     itself for a bare repository (when .git is broken); only .git is a
//     repository (gitConfine checks it is the one git found).
//
// Diff drivers (diff.<driver>.command, .textconv, diff.external) are
// disabled by --no-ext-diff and --no-textconv wherever git produces a patch.
// Filter drivers (filter.<driver>.clean/smudge/process), named from
// .gitattributes, cannot be listed in advance: session.open reads the
// configuration and overrides each one it finds, and every other program
// it names (session.driverOverrides).
var hardenArgs = []string{
	"--no-pager",
	"-c", "core.fsmonitor=false",
	"-c", "core.hooksPath=/dev/null",
	"-c", "core.pager=cat",
	"-c", "core.editor=:",
	"-c", "core.askPass=",
	"-c", "core.sshCommand=false",
	"-c", "core.attributesFile=/dev/null",
	"-c", "core.excludesFile=/dev/null",
	"-c", "diff.orderFile=/dev/null",
	"-c", "diff.autoRefreshIndex=false",
	"-c", "diff.submodule=short",
	"-c", "diff.ignoreSubmodules=dirty",
	"-c", "status.submoduleSummary=false",
	"-c", "submodule.recurse=false",
	"-c", "protocol.allow=never",
	"-c", "log.showSignature=false",
	"-c", "log.mailmap=false",
	"-c", "mailmap.file=/dev/null",
	"-c", "commit.gpgSign=false",
	"-c", "tag.gpgSign=false",
	"-c", "gpg.program=false",
	"-c", "gc.auto=0",
	"-c", "maintenance.auto=false",
	"-c", "color.ui=false",
	"-c", "uploadpack.packObjectsHook=",
	"-c", "safe.bareRepository=explicit",
}

// baseEnv is git's whole environment (nothing is inherited from warden's
// own): no system or global configuration, no home, no prompts, no
// transports, literal pathspecs, the C locale, a fixed PATH.
func baseEnv(ws string) []string {
	return []string{
		"PATH=" + gitPath,
		"HOME=/nonexistent",
		"XDG_CONFIG_HOME=/nonexistent",
		"LC_ALL=C",
		"GIT_CONFIG_NOSYSTEM=1",
		"GIT_CONFIG_GLOBAL=/dev/null",
		"GIT_ATTR_NOSYSTEM=1",
		"GIT_TERMINAL_PROMPT=0",
		// Empty (not unset): git then never falls back to core.askPass.
		"GIT_ASKPASS=",
		"SSH_ASKPASS=",
		"GIT_SSH_COMMAND=false",
		"GIT_EDITOR=:",
		"GIT_SEQUENCE_EDITOR=:",
		"GIT_PAGER=cat",
		"PAGER=cat",
		// A protocol allow-list that names nothing: it outranks every
		// protocol.<name>.allow in the repository's config.
		"GIT_ALLOW_PROTOCOL=",
		"GIT_PROTOCOL_FROM_USER=0",
		"GIT_NO_LAZY_FETCH=1",
		"GIT_LITERAL_PATHSPECS=1",
		// The repository is the workspace: discovery stops there, and the
		// work tree is the workspace whatever core.worktree says.
		"GIT_CEILING_DIRECTORIES=" + filepath.Dir(ws),
		"GIT_WORK_TREE=" + ws,
	}
}

// session is one call's access to the repository: the resolved binary,
// the hardened environment (including the filter overrides found in the
// repository's config) and the call's deadline.
type session struct {
	g      *runner
	ctx    context.Context
	cancel context.CancelFunc
	bin    string
	ws     string
	env    []string
	// box: git reads the workspace (the repository and its work tree),
	// and writes it only for calls that change it; no TCP.
	box     sandbox.Spec
	needBox bool
}

// gitOut is what one git process returned.
type gitOut struct {
	Stdout    []byte
	Stderr    string
	Code      int
	Truncated bool
}

// open checks that the workspace is a git repository and prepares the
// hardened environment. readOnly calls also forbid git's optional index
// refresh, so a read changes nothing under .git.
//
// The repository must be the workspace's own: .git a real directory (not a
// symlink, not a "gitdir:" file) whose git directory, common directory,
// object directory and alternates all stay inside the workspace (see
// gitConfine). Otherwise the call fails with PATH_ESCAPE before git reads
// anything of the repository but what locating it needs.
func (g *runner) open(ctx context.Context, c *tool.Call, readOnly bool) (*session, *tool.Error) {
	ws := c.Workspace
	real, e := checkDotGit(ws)
	if e != nil {
		return nil, e
	}
	bin, e := g.binary()
	if e != nil {
		return nil, e
	}
	s := &session{g: g, bin: bin, ws: ws, env: baseEnv(ws), needBox: c.RequireSandbox,
		box: sandbox.Spec{Read: []string{bin}, Write: []string{ws}, Limits: c.Limits}}
	if readOnly {
		s.env = append(s.env, "GIT_OPTIONAL_LOCKS=0")
		s.box.Read, s.box.Write = append(s.box.Read, ws), nil
	}
	// git changes .git (hardened: no hook runs), but never .warden or what
	// the policy protects.
	prot, perr := proc.ProtectedPaths(c, s.box.Write, false)
	if perr != nil {
		return nil, tool.Errorf(tool.CodePolicyDenied, "narrow the policy's protect: entries", "git cannot start: %v", perr)
	}
	s.box.Protect = prot
	s.ctx, s.cancel = context.WithTimeout(ctx, g.o.Timeout)
	if e := s.confine(real); e != nil {
		s.cancel()
		return nil, e
	}
	if e := s.driverOverrides(); e != nil {
		s.cancel()
		return nil, e
	}
	return s, nil
}

// driverOverrides lists the configuration and adds to the session's
// environment the command-scope settings that turn off every program it
// names (gitcfg.Overrides, All: this git reads no user configuration, so
// all of it is the repository's): filter drivers, named from
// .gitattributes, cannot be listed in advance, and --no-ext-diff and
// --no-textconv are the second line for the diff drivers.
func (s *session) driverOverrides() *tool.Error {
	var f gitcfg.Format
	out, e := s.run(nil, maxParse, f.Args()...)
	if e != nil {
		return e
	}
	if out.Code != 0 {
		return s.fail(out, "config")
	}
	entries, err := f.Parse(out.Stdout)
	if err == nil && out.Truncated {
		err = fmt.Errorf("it is longer than %d bytes", maxParse)
	}
	if err != nil {
		return tool.Errorf(tool.CodeCommandFailed, "check the repository's configuration (git config --list)",
			"the repository's configuration could not be read: %v", err)
	}
	s.env = append(s.env, gitcfg.Env(gitcfg.Overrides(entries, gitcfg.All))...)
	return nil
}

func (s *session) close() { s.cancel() }

// ---- confinement: the workspace's own repository, and nothing outside ----
//
// A repository can name another repository's files in several ways, each of
// which would let a git.read call read, or a git.write call change, a
// repository outside the workspace that no grant names:
//
//   - .git as a "gitdir: /elsewhere" file (linked worktrees, submodule
//     checkouts) or as a symlink;
//   - $GIT_DIR/commondir, which moves objects, refs and config elsewhere;
//   - symlinks inside the git directory (objects, refs, index, HEAD, …);
//   - objects/info/alternates, from which git reads objects.
//
// checkDotGit refuses the first before git starts; session.confine
// asks git where the git and common directories are and checks the rest.
// What is not checked: the loose object files themselves (objects/xx/…).
// Walking every loose object on each call would cost as much as the call
// (~10 ms for 10,000), so a symlink planted there in place of one object,
// to another repository's copy of it, would be followed by git; a
// symlinked objects/xx directory is refused. Between these checks and
// the git process that follows, something else writing the workspace could
// still swap .git; warden's own tools cannot write under .git.

// confineHint is the hint of every confinement refusal.
const confineHint = "the git tools work only on the workspace's own repository: .git must be a directory inside the workspace, " +
	"with no commondir, alternates or symlinks leading out of it. Linked worktrees (git worktree), submodule checkouts and " +
	"shared object stores are not supported; set --workspace to the repository's main checkout"

func escape(format string, args ...any) *tool.Error {
	return tool.Errorf(tool.CodePathEscape, confineHint, format, args...)
}

// within reports whether p is root or under it (both clean, absolute).
func within(root, p string) bool {
	return p == root || root == "/" || strings.HasPrefix(p, root+"/")
}

// maxDotGitFile caps what is read of a .git file or an alternates file.
const maxDotGitFile = 64 << 10

// maxAltDepth is how deep alternates may chain (git's own limit is 5).
const maxAltDepth = 5

// checkDotGit checks that <ws>/.git is a real directory, and returns the
// workspace with its symlinks resolved.
func checkDotGit(ws string) (string, *tool.Error) {
	real, err := filepath.EvalSymlinks(ws)
	if err != nil {
		return "", gitNotRepo(ws)
	}
	dot := filepath.Join(real, ".git")
	st, err := os.Lstat(dot)
	switch {
	case err != nil:
		return "", gitNotRepo(ws)
	case st.Mode()&fs.ModeSymlink != 0:
		target, _ := os.Readlink(dot)
		return "", escape("%s is a symlink (to %s), not a directory: git would use a repository the workspace does not contain", dot, target)
	case st.Mode().IsRegular():
		line := ""
		if b, e := readSmall(dot); e == nil {
			line, _, _ = strings.Cut(strings.TrimSpace(string(b)), "\n")
			line = strings.TrimSpace(line)
		}
		if line == "" {
			line = "unreadable"
		}
		return "", escape("%s is a file (%q), not a directory: the repository it names (a linked worktree's or a submodule's) is not the workspace's own", dot, line)
	case !st.IsDir():
		return "", gitNotRepo(ws)
	}
	return real, nil
}

// readSmall reads a small regular file without following a final
// symlink and without blocking on a FIFO; past maxDotGitFile it fails.
func readSmall(name string) ([]byte, error) {
	f, err := os.OpenFile(name, os.O_RDONLY|fspath.ONofollow|fspath.ONonblock, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !st.Mode().IsRegular() {
		return nil, fmt.Errorf("%s is not a regular file", name)
	}
	b, err := io.ReadAll(io.LimitReader(f, maxDotGitFile+1))
	if err != nil {
		return nil, err
	}
	if len(b) > maxDotGitFile {
		return nil, fmt.Errorf("%s is larger than %d bytes", name, maxDotGitFile)
	}
	return b, nil
}

// confine asks git which git directory and common directory it found, and
// refuses unless they are the workspace's .git (and a directory inside the
// workspace), no symlink in them leads out, and no alternate object store
// is outside the workspace. real is the workspace with symlinks resolved.
func (s *session) confine(real string) *tool.Error {
	out, e := s.run(nil, 4*4096, "rev-parse", "--absolute-git-dir", "--git-common-dir")
	if e != nil {
		return e
	}
	if out.Code != 0 && strings.Contains(out.Stderr, "Permission denied") {
		// git's sandbox reaches only the workspace: what it could not
		// read lies outside it.
		return escape("git could not read part of the repository (%s): it lies outside the workspace, which is all git may read",
			strings.TrimSpace(out.Stderr))
	}
	if out.Code != 0 {
		return s.fail(out, "rev-parse")
	}
	if out.Truncated {
		return escape("git reported an over-long repository location")
	}
	want := filepath.Join(real, ".git")
	// The workspace's path may hold a newline: cut at the expected git
	// directory, not at the first newline.
	rest, ok := strings.CutPrefix(string(out.Stdout), want+"\n")
	if !ok {
		got, _, _ := strings.Cut(string(out.Stdout), "\n")
		return escape("git found the repository at %s, not at %s", got, want)
	}
	common := strings.TrimSuffix(rest, "\n")
	if common == "" {
		return escape("git reported no common directory for %s", want)
	}
	if !filepath.IsAbs(common) {
		common = filepath.Join(real, common)
	}
	rc, err := filepath.EvalSymlinks(common)
	if err != nil {
		return escape("the repository's common directory %s cannot be resolved: %v", common, err)
	}
	if !within(real, rc) {
		return escape("the repository's common directory is %s (set by %s), outside the workspace: its objects, refs and config belong to another repository",
			rc, filepath.Join(want, "commondir"))
	}
	if e := scanLinks(real, want); e != nil {
		return e
	}
	if !within(want, rc) {
		if e := scanLinks(real, rc); e != nil {
			return e
		}
	}
	objs, err := filepath.EvalSymlinks(filepath.Join(rc, "objects"))
	if err != nil {
		return escape("the repository's object directory %s cannot be resolved: %v", filepath.Join(rc, "objects"), err)
	}
	if !within(real, objs) {
		return escape("the repository's object directory is %s, outside the workspace", objs)
	}
	return checkAlternates(real, objs, 0)
}

// scanLinks walks a git (or object) directory and refuses any symlink in
// it that is not a link to a regular file inside the workspace: a symlinked
// directory (refs, objects, objects/xx, …) or a link leading out. The
// contents of loose-object directories (objects/[0-9a-f]{2}) are not walked:
// there can be millions of them.
func scanLinks(real, dir string) *tool.Error {
	var bad *tool.Error
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if p == dir {
				return err
			}
			// Unreadable for warden is unreadable for git (same user).
			if d != nil && d.IsDir() {
				return fs.SkipDir
			}
			return nil
		}
		if d.Type()&fs.ModeSymlink != 0 {
			t, err := filepath.EvalSymlinks(p)
			if err != nil {
				target, _ := os.Readlink(p)
				bad = escape("%s is a symlink (to %s) that does not resolve inside the workspace", p, target)
				return fs.SkipAll
			}
			st, err := os.Stat(t)
			switch {
			case !within(real, t):
				bad = escape("%s is a symlink to %s, outside the workspace", p, t)
				return fs.SkipAll
			case err != nil || !st.Mode().IsRegular():
				bad = escape("%s is a symlink to %s, which is not a regular file (symlinked directories in a git directory are refused)", p, t)
				return fs.SkipAll
			}
			return nil
		}
		if d.IsDir() && p != dir && looseObjectDir(p) {
			return fs.SkipDir
		}
		return nil
	})
	if bad != nil {
		return bad
	}
	if err != nil {
		return escape("cannot check %s: %v", dir, err)
	}
	return nil
}

// looseObjectDir reports whether p is .../objects/xx (two hex digits).
func looseObjectDir(p string) bool {
	base := filepath.Base(p)
	if len(base) != 2 || filepath.Base(filepath.Dir(p)) != "objects" {
		return false
	}
	for i := 0; i < 2; i++ {
		c := base[i]
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return false
		}
	}
	return true
}

// checkAlternates refuses an object directory whose info/alternates (or
// an alternate's, recursively) names an object store outside the workspace:
// git would read objects from it. Entries are parsed as git does: one a
// line, '#' comments, relative to the object directory, normalised before
// symlinks are resolved. C-quoted entries are refused (rare; not worth a
// second parser whose disagreement with git's would be a hole).
func checkAlternates(real, objdir string, depth int) *tool.Error {
	name := filepath.Join(objdir, "info", "alternates")
	if _, err := os.Lstat(name); errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	rp, err := filepath.EvalSymlinks(name)
	if err != nil {
		return escape("%s cannot be resolved: %v", name, err)
	}
	if !within(real, rp) {
		return escape("%s leads to %s, outside the workspace", name, rp)
	}
	b, err := readSmall(rp)
	if err != nil {
		return escape("cannot check %s: %v", name, err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if line == "" || line[0] == '#' {
			continue
		}
		if depth >= maxAltDepth {
			return escape("%s chains alternate object stores more than %d deep", name, maxAltDepth)
		}
		if line[0] == '"' {
			return escape("%s has a quoted entry (%s), which warden does not check; the git tools refuse it", name, line)
		}
		p := line
		if !filepath.IsAbs(p) {
			p = filepath.Join(objdir, p)
		}
		alt, err := filepath.EvalSymlinks(filepath.Clean(p))
		if err != nil {
			return escape("%s names the object store %s, which cannot be resolved: %v", name, p, err)
		}
		if !within(real, alt) {
			return escape("%s names the object store %s, outside the workspace: git would read another repository's objects", name, alt)
		}
		if e := scanLinks(real, alt); e != nil {
			return e
		}
		if e := checkAlternates(real, alt, depth+1); e != nil {
			return e
		}
	}
	return nil
}

// gitNotRepo is the NOT_FOUND error for a workspace that is not a repository.
func gitNotRepo(ws string) *tool.Error {
	return tool.Errorf(tool.CodeNotFound,
		"run inside a git repository (git init), or set --workspace to the repository's top directory",
		"%s is not a git repository (the git tools work on the workspace's own repository, with .git at its top)", ws)
}

// gitArgv is the full argv of one git invocation (what a preview shows).
func gitArgv(args ...string) []string {
	argv := make([]string, 0, 1+len(hardenArgs)+len(args))
	argv = append(argv, "git")
	argv = append(argv, hardenArgs...)
	return append(argv, args...)
}

// run starts git with args (after the hardening) in the workspace and waits.
// It keeps at most max bytes of stdout. A non-zero exit is not an error here;
// failing to start, or the deadline, is.
func (s *session) run(stdin io.Reader, max int, args ...string) (gitOut, *tool.Error) {
	return s.runEnv(nil, stdin, max, args...)
}

func (s *session) runEnv(extraEnv []string, stdin io.Reader, max int, args ...string) (gitOut, *tool.Error) {
	stdout := &proc.CappedBuffer{Max: max}
	stderr := &proc.CappedBuffer{Max: maxStderr}
	env := s.env
	if len(extraEnv) > 0 {
		env = append(append([]string(nil), s.env...), extraEnv...)
	}
	code, err := proc.Run(s.ctx, proc.Spec{
		Path: s.bin, Args: gitArgv(args...), Dir: s.ws, Env: env,
		Stdin: stdin, Stdout: stdout, Stderr: stderr,
		Box: s.box, RequireBox: s.needBox,
	})
	sub := subcommand(args)
	if errors.Is(err, proc.ErrSandboxRequired) {
		return gitOut{}, proc.SandboxRequiredError(err)
	}
	if err != nil {
		if errors.Is(err, proc.ErrKilled) {
			if errors.Is(s.ctx.Err(), context.DeadlineExceeded) {
				return gitOut{}, tool.Errorf(tool.CodeCommandTimeout, "the repository may be very large; raise the git tools' timeout",
					"git %s did not finish within %s and was stopped", sub, s.g.o.Timeout)
			}
			return gitOut{}, tool.Errorf(tool.CodeCommandFailed, "", "git %s was stopped: the call was cancelled", sub)
		}
		if errors.Is(err, fs.ErrNotExist) || errors.Is(err, fs.ErrPermission) {
			return gitOut{}, tool.Errorf(tool.CodeCommandNotFound, "install git, or configure the git tools with its absolute path",
				"cannot start git (%s): %v", s.bin, err)
		}
		return gitOut{}, tool.Errorf(tool.CodeCommandFailed, "", "cannot start git (%s): %v", s.bin, err)
	}
	o := gitOut{Stdout: stdout.Bytes(), Stderr: stderr.String(), Code: code, Truncated: stdout.Truncated()}
	return o, nil
}

func subcommand(args []string) string {
	for _, a := range args {
		if !strings.HasPrefix(a, "-") {
			return a
		}
	}
	return ""
}

// fail turns a failed git process into the tool's error: NOT_FOUND when the
// workspace is not a repository or a revision does not exist, else
// COMMAND_FAILED with git's own message (the gate redacts it).
func (s *session) fail(out gitOut, sub string) *tool.Error {
	msg := strings.TrimSpace(out.Stderr)
	if msg == "" {
		msg = strings.TrimSpace(string(out.Stdout))
		if len(msg) > maxStderr {
			msg = msg[:maxStderr]
		}
	}
	low := strings.ToLower(msg)
	switch {
	case strings.Contains(low, "not a git repository"), strings.Contains(low, "cannot use bare repository"):
		// The second: .git is broken and git found the workspace laid out as
		// a bare repository, which safe.bareRepository=explicit refuses.
		return gitNotRepo(s.ws)
	case strings.Contains(low, "dubious ownership"):
		return tool.Errorf(tool.CodeCommandFailed,
			"the repository belongs to another user; git refuses to work in it (safe.directory). Use a repository you own",
			"git %s failed: %s", sub, msg)
	case unknownRevision(low):
		return tool.Errorf(tool.CodeNotFound, "list branches with git_branches, or use a commit id",
			"git %s: %s", sub, msg)
	}
	return tool.Errorf(tool.CodeCommandFailed, "see git's message; check the arguments against the repository's state",
		"git %s failed (exit status %d): %s", sub, out.Code, msg)
}

func unknownRevision(low string) bool {
	for _, s := range []string{"unknown revision", "bad revision", "bad object", "not a valid object name",
		"invalid object name", "not a valid commit name", "does not exist in", "exists on disk, but not in",
		"needed a single revision", "ambiguous argument"} {
		if strings.Contains(low, s) {
			return true
		}
	}
	return false
}

// unborn reports whether HEAD names a branch with no commit yet.
func (s *session) unborn() (bool, *tool.Error) {
	out, e := s.run(nil, 4096, "rev-parse", "--verify", "--quiet", "HEAD")
	if e != nil {
		return false, e
	}
	switch out.Code {
	case 0:
		return false, nil
	case 1:
		return true, nil
	}
	return false, s.fail(out, "rev-parse")
}

// emptyTree returns the id of the empty tree in the repository's hash.
func (s *session) emptyTree() (string, *tool.Error) {
	out, e := s.run(strings.NewReader(""), 4096, "hash-object", "-t", "tree", "--stdin")
	if e != nil {
		return "", e
	}
	if out.Code != 0 {
		return "", s.fail(out, "hash-object")
	}
	return strings.TrimSpace(string(out.Stdout)), nil
}

// checkRev refuses a user-supplied revision that git could read as an
// option, or that holds control characters. It goes after --end-of-options
// as well, so this is the second line.
func checkRev(field, rev string) *tool.Error {
	hint := "give a branch, tag, commit id or range (e.g. HEAD~1, main..feature)"
	switch {
	case rev == "":
		return tool.Errorf(tool.CodeInvalidInput, hint, "%s is empty", field)
	case strings.HasPrefix(rev, "-"):
		return tool.Errorf(tool.CodeInvalidInput, hint, "%s %q starts with '-': revisions never do, and git would read it as an option", field, rev)
	case len(rev) > 1024:
		return tool.Errorf(tool.CodeInvalidInput, hint, "%s is %d bytes; revisions are at most 1024", field, len(rev))
	}
	for _, r := range rev {
		if r < 0x20 || r == 0x7f {
			return tool.Errorf(tool.CodeInvalidInput, hint, "%s contains a control character (%U)", field, r)
		}
	}
	return nil
}

// workspacePath turns a user path (relative to the workspace, or
// absolute) into a clean path relative to the workspace, refusing one that
// leaves it: lexically (..) or through a symlinked directory. The last
// element is not followed: git reads a tracked symlink as a link, never
// through it.
func workspacePath(ws, p string) (string, *tool.Error) {
	if p == "" || strings.ContainsRune(p, 0) {
		return "", tool.Errorf(tool.CodeInvalidInput, "give a path relative to the workspace", "path %q is empty or contains NUL", p)
	}
	abs := p
	if !filepath.IsAbs(abs) {
		abs = filepath.Join(ws, p)
	}
	abs = filepath.Clean(abs)
	rel, err := filepath.Rel(ws, abs)
	if err != nil || rel == ".." || strings.HasPrefix(rel, "../") {
		return "", tool.Errorf(tool.CodePathEscape, "give a path inside the workspace ("+ws+")", "path %q is outside the workspace", p)
	}
	if rel == "." {
		return rel, nil
	}
	dir, err := capability.ResolvePath(ws, filepath.Dir(rel))
	if err != nil {
		return "", tool.Errorf(tool.CodeInvalidInput, "", "path %q: %v", p, err)
	}
	if dir != ws && !strings.HasPrefix(dir, ws+"/") {
		return "", tool.Errorf(tool.CodePathEscape, "give a path inside the workspace ("+ws+")",
			"path %q leaves the workspace through a symlink (to %s)", p, dir)
	}
	return rel, nil
}

// readNeeds is what every read tool needs.
func readNeeds() []capability.Need { return []capability.Need{{Kind: capability.GitRead}} }

// quoteArgv renders an argv for a person to read.
func quoteArgv(argv []string) string {
	parts := make([]string, len(argv))
	for i, a := range argv {
		if a != "" && !strings.ContainsAny(a, " \t\n'\"\\$`!*?[]{}();&|<>#~") {
			parts[i] = a
			continue
		}
		parts[i] = "'" + strings.ReplaceAll(a, "'", `'\''`) + "'"
	}
	return strings.Join(parts, " ")
}

// textOut turns bytes git printed into result text: valid UTF-8, with a
// marker when it was cut.
func textOut(b []byte, truncated bool, max int) string {
	s := strings.ToValidUTF8(string(b), "\uFFFD")
	if truncated {
		s += fmt.Sprintf("\n… [output truncated at %d bytes]", max)
	}
	return s
}
