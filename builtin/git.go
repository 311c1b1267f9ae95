package builtin

// The git family: git_status, git_diff, git_show, git_branches,
// git_apply_patch and git_commit. Every tool shells out to the real git
// binary through runProc, on the workspace's own repository, with git's
// configuration hardened so that nothing in the repository — .git/config,
// .gitattributes, hooks, include files — can make git start a program or
// reach the network. See gitHardenArgs and gitBaseEnv for the list and the
// reasons.

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/wardenrt/warden/runtime"
	"github.com/wardenrt/warden/runtime/capability"
)

// GitOptions configures the git tools. A nil *GitOptions, and every zero
// field, means the default.
type GitOptions struct {
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

// Defaults of GitOptions.
const (
	gitDefaultTimeout   = 60 * time.Second
	gitDefaultMaxOutput = 1 << 20
	// gitMaxParse caps the machine-readable output git may give one call
	// (status, numstat, for-each-ref) before it is cut and marked truncated.
	gitMaxParse = 16 << 20
	// gitMaxStderr caps what is kept of git's error output.
	gitMaxStderr = 16 << 10
	// gitMaxEntries caps the entries listed in a result's data.
	gitMaxEntries = 5000
)

// GitTools returns the six git tools, sharing one configuration. cmd/warden
// registers them; o may be nil.
func GitTools(o *GitOptions) []runtime.Tool {
	g := &gitRunner{}
	if o != nil {
		g.o = *o
	}
	if g.o.Timeout <= 0 {
		g.o.Timeout = gitDefaultTimeout
	}
	if g.o.MaxOutput <= 0 {
		g.o.MaxOutput = gitDefaultMaxOutput
	}
	return []runtime.Tool{
		&gitStatusTool{g}, &gitDiffTool{g}, &gitShowTool{g}, &gitBranchesTool{g},
		&gitApplyPatchTool{g}, &gitCommitTool{g},
	}
}

var (
	_ runtime.Tool = (*gitStatusTool)(nil)
	_ runtime.Tool = (*gitDiffTool)(nil)
	_ runtime.Tool = (*gitShowTool)(nil)
	_ runtime.Tool = (*gitBranchesTool)(nil)
	_ runtime.Tool = (*gitApplyPatchTool)(nil)
	_ runtime.Tool = (*gitCommitTool)(nil)
)

// gitRunner is what the six tools share.
type gitRunner struct {
	o GitOptions
}

// gitPath is the fixed PATH git (and anything it might start) sees.
const gitPath = "/usr/bin:/bin"

// binary returns the git program to start.
func (g *gitRunner) binary() (string, *runtime.Error) {
	if g.o.Binary != "" {
		if !filepath.IsAbs(g.o.Binary) {
			return "", runtime.Errorf(runtime.CodeCommandNotFound, "configure the git tools with the absolute path of git",
				"git binary %q is not an absolute path", g.o.Binary)
		}
		if st, err := os.Stat(g.o.Binary); err != nil || st.IsDir() || st.Mode()&0o111 == 0 {
			return "", runtime.Errorf(runtime.CodeCommandNotFound, "install git, or configure the git tools with its absolute path",
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
	return "", runtime.Errorf(runtime.CodeCommandNotFound, "install git (e.g. apt-get install git)", "git is not installed in %s", gitPath)
}

// gitHardenArgs go before every git subcommand. Command-line configuration
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
//
// Diff drivers (diff.<driver>.command, .textconv, diff.external) are
// disabled by --no-ext-diff and --no-textconv wherever git produces a patch.
// Filter drivers (filter.<driver>.clean/smudge/process), named from
// .gitattributes, cannot be listed in advance: gitSession.open reads the
// configuration and overrides each one it finds (gitFilterOverrides).
var gitHardenArgs = []string{
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
}

// gitBaseEnv is git's whole environment (nothing is inherited from warden's
// own): no system or global configuration, no home, no prompts, no
// transports, literal pathspecs, the C locale, a fixed PATH.
func gitBaseEnv(ws string) []string {
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

// gitSession is one call's access to the repository: the resolved binary,
// the hardened environment (including the filter overrides found in the
// repository's config) and the call's deadline.
type gitSession struct {
	g      *gitRunner
	ctx    context.Context
	cancel context.CancelFunc
	bin    string
	ws     string
	env    []string
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
func (g *gitRunner) open(ctx context.Context, ws string, readOnly bool) (*gitSession, *runtime.Error) {
	if st, err := os.Lstat(filepath.Join(ws, ".git")); err != nil || !(st.IsDir() || st.Mode().IsRegular() || st.Mode()&os.ModeSymlink != 0) {
		return nil, gitNotRepo(ws)
	}
	bin, e := g.binary()
	if e != nil {
		return nil, e
	}
	s := &gitSession{g: g, bin: bin, ws: ws, env: gitBaseEnv(ws)}
	if readOnly {
		s.env = append(s.env, "GIT_OPTIONAL_LOCKS=0")
	}
	s.ctx, s.cancel = context.WithTimeout(ctx, g.o.Timeout)
	out, e := s.run(nil, gitMaxParse, "config", "-z", "--list")
	if e != nil {
		s.cancel()
		return nil, e
	}
	if out.Code != 0 {
		s.cancel()
		return nil, s.fail(out, "config")
	}
	s.env = append(s.env, gitFilterOverrides(out.Stdout)...)
	return s, nil
}

func (s *gitSession) close() { s.cancel() }

// gitNotRepo is the NOT_FOUND error for a workspace that is not a repository.
func gitNotRepo(ws string) *runtime.Error {
	return runtime.Errorf(runtime.CodeNotFound,
		"run inside a git repository (git init), or set --workspace to the repository's top directory",
		"%s is not a git repository (the git tools work on the workspace's own repository, with .git at its top)", ws)
}

// gitFilterOverrides turns `git config -z --list` output into environment
// entries (GIT_CONFIG_COUNT/KEY/VALUE, command-line scope) that disable
// every filter driver the configuration defines: process set to "" makes git
// ignore clean and smudge too, and required=false keeps git from failing for
// want of the filter. The environment form keeps key and value apart, so a
// driver name containing "=" cannot confuse it the way `-c` would.
func gitFilterOverrides(list []byte) []string {
	seen := map[string]bool{}
	var keys, vals []string
	for _, rec := range bytes.Split(list, []byte{0}) {
		key := string(rec)
		if i := strings.IndexByte(key, '\n'); i >= 0 {
			key = key[:i]
		}
		if !strings.HasPrefix(key, "filter.") {
			continue
		}
		dot := strings.LastIndexByte(key, '.')
		if dot <= len("filter.") {
			continue // filter.<key> without a driver name
		}
		name := key[len("filter."):dot]
		if seen[name] {
			continue
		}
		seen[name] = true
		for _, kv := range [][2]string{{"process", ""}, {"clean", ""}, {"smudge", ""}, {"required", "false"}} {
			keys = append(keys, "filter."+name+"."+kv[0])
			vals = append(vals, kv[1])
		}
	}
	if len(keys) == 0 {
		return nil
	}
	env := []string{"GIT_CONFIG_COUNT=" + strconv.Itoa(len(keys))}
	for i := range keys {
		n := strconv.Itoa(i)
		env = append(env, "GIT_CONFIG_KEY_"+n+"="+keys[i], "GIT_CONFIG_VALUE_"+n+"="+vals[i])
	}
	return env
}

// gitArgv is the full argv of one git invocation (what a preview shows).
func gitArgv(args ...string) []string {
	argv := make([]string, 0, 1+len(gitHardenArgs)+len(args))
	argv = append(argv, "git")
	argv = append(argv, gitHardenArgs...)
	return append(argv, args...)
}

// run starts git with args (after the hardening) in the workspace and waits.
// It keeps at most max bytes of stdout. A non-zero exit is not an error here;
// failing to start, or the deadline, is.
func (s *gitSession) run(stdin io.Reader, max int, args ...string) (gitOut, *runtime.Error) {
	return s.runEnv(nil, stdin, max, args...)
}

func (s *gitSession) runEnv(extraEnv []string, stdin io.Reader, max int, args ...string) (gitOut, *runtime.Error) {
	stdout := &cappedBuffer{Max: max}
	stderr := &cappedBuffer{Max: gitMaxStderr}
	env := s.env
	if len(extraEnv) > 0 {
		env = append(append([]string(nil), s.env...), extraEnv...)
	}
	code, err := runProc(s.ctx, procSpec{
		Path: s.bin, Args: gitArgv(args...), Dir: s.ws, Env: env,
		Stdin: stdin, Stdout: stdout, Stderr: stderr,
	})
	sub := gitSubcommand(args)
	if err != nil {
		if errors.Is(err, errProcKilled) {
			if errors.Is(s.ctx.Err(), context.DeadlineExceeded) {
				return gitOut{}, runtime.Errorf(runtime.CodeCommandTimeout, "the repository may be very large; raise the git tools' timeout",
					"git %s did not finish within %s and was stopped", sub, s.g.o.Timeout)
			}
			return gitOut{}, runtime.Errorf(runtime.CodeCommandFailed, "", "git %s was stopped: the call was cancelled", sub)
		}
		if errors.Is(err, fs.ErrNotExist) || errors.Is(err, fs.ErrPermission) {
			return gitOut{}, runtime.Errorf(runtime.CodeCommandNotFound, "install git, or configure the git tools with its absolute path",
				"cannot start git (%s): %v", s.bin, err)
		}
		return gitOut{}, runtime.Errorf(runtime.CodeCommandFailed, "", "cannot start git (%s): %v", s.bin, err)
	}
	o := gitOut{Stdout: stdout.buf.Bytes(), Stderr: stderr.String(), Code: code, Truncated: stdout.Truncated()}
	return o, nil
}

func gitSubcommand(args []string) string {
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
func (s *gitSession) fail(out gitOut, sub string) *runtime.Error {
	msg := strings.TrimSpace(out.Stderr)
	if msg == "" {
		msg = strings.TrimSpace(string(out.Stdout))
		if len(msg) > gitMaxStderr {
			msg = msg[:gitMaxStderr]
		}
	}
	low := strings.ToLower(msg)
	switch {
	case strings.Contains(low, "not a git repository"):
		return gitNotRepo(s.ws)
	case strings.Contains(low, "dubious ownership"):
		return runtime.Errorf(runtime.CodeCommandFailed,
			"the repository belongs to another user; git refuses to work in it (safe.directory). Use a repository you own",
			"git %s failed: %s", sub, msg)
	case gitUnknownRevision(low):
		return runtime.Errorf(runtime.CodeNotFound, "list branches with git_branches, or use a commit id",
			"git %s: %s", sub, msg)
	}
	return runtime.Errorf(runtime.CodeCommandFailed, "see git's message; check the arguments against the repository's state",
		"git %s failed (exit status %d): %s", sub, out.Code, msg)
}

func gitUnknownRevision(low string) bool {
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
func (s *gitSession) unborn() (bool, *runtime.Error) {
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
func (s *gitSession) emptyTree() (string, *runtime.Error) {
	out, e := s.run(strings.NewReader(""), 4096, "hash-object", "-t", "tree", "--stdin")
	if e != nil {
		return "", e
	}
	if out.Code != 0 {
		return "", s.fail(out, "hash-object")
	}
	return strings.TrimSpace(string(out.Stdout)), nil
}

// gitCheckRev refuses a user-supplied revision that git could read as an
// option, or that holds control characters. It goes after --end-of-options
// as well, so this is the second line.
func gitCheckRev(field, rev string) *runtime.Error {
	hint := "give a branch, tag, commit id or range (e.g. HEAD~1, main..feature)"
	switch {
	case rev == "":
		return runtime.Errorf(runtime.CodeInvalidInput, hint, "%s is empty", field)
	case strings.HasPrefix(rev, "-"):
		return runtime.Errorf(runtime.CodeInvalidInput, hint, "%s %q starts with '-': revisions never do, and git would read it as an option", field, rev)
	case len(rev) > 1024:
		return runtime.Errorf(runtime.CodeInvalidInput, hint, "%s is %d bytes; revisions are at most 1024", field, len(rev))
	}
	for _, r := range rev {
		if r < 0x20 || r == 0x7f {
			return runtime.Errorf(runtime.CodeInvalidInput, hint, "%s contains a control character (%U)", field, r)
		}
	}
	return nil
}

// gitWorkspacePath turns a user path (relative to the workspace, or
// absolute) into a clean path relative to the workspace, refusing one that
// leaves it: lexically (..) or through a symlinked directory. The last
// element is not followed: git reads a tracked symlink as a link, never
// through it.
func gitWorkspacePath(ws, p string) (string, *runtime.Error) {
	if p == "" || strings.ContainsRune(p, 0) {
		return "", runtime.Errorf(runtime.CodeInvalidInput, "give a path relative to the workspace", "path %q is empty or contains NUL", p)
	}
	abs := p
	if !filepath.IsAbs(abs) {
		abs = filepath.Join(ws, p)
	}
	abs = filepath.Clean(abs)
	rel, err := filepath.Rel(ws, abs)
	if err != nil || rel == ".." || strings.HasPrefix(rel, "../") {
		return "", runtime.Errorf(runtime.CodePathEscape, "give a path inside the workspace ("+ws+")", "path %q is outside the workspace", p)
	}
	if rel == "." {
		return rel, nil
	}
	dir, err := capability.ResolvePath(ws, filepath.Dir(rel))
	if err != nil {
		return "", runtime.Errorf(runtime.CodeInvalidInput, "", "path %q: %v", p, err)
	}
	if dir != ws && !strings.HasPrefix(dir, ws+"/") {
		return "", runtime.Errorf(runtime.CodePathEscape, "give a path inside the workspace ("+ws+")",
			"path %q leaves the workspace through a symlink (to %s)", p, dir)
	}
	return rel, nil
}

// gitReadNeeds is what every read tool needs.
func gitReadNeeds() []capability.Need { return []capability.Need{{Kind: capability.GitRead}} }

// gitQuoteArgv renders an argv for a person to read.
func gitQuoteArgv(argv []string) string {
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

// gitBind binds a call's arguments, as an *runtime.Error.
func gitBind(c *runtime.Call, v any) *runtime.Error {
	if err := c.Bind(v); err != nil {
		e := runtime.AsError(err)
		if e.Code == runtime.CodeInternal {
			e = &runtime.Error{Code: runtime.CodeInvalidInput, Message: e.Message}
		}
		return e
	}
	return nil
}

// gitTextOut turns bytes git printed into result text: valid UTF-8, with a
// marker when it was cut.
func gitTextOut(b []byte, truncated bool, max int) string {
	s := strings.ToValidUTF8(string(b), "\uFFFD")
	if truncated {
		s += fmt.Sprintf("\n… [output truncated at %d bytes]", max)
	}
	return s
}
