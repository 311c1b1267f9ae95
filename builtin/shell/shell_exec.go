package shell

// The shell tool at run time: the interpreter's handlers. Every program the
// interpreter would start reaches run.exec, every file it opens
// run.open, every stat, access check and directory listing (tests, cd,
// globbing) the matching handler, and every simple command run.call
// (which guards cd). Each checks the call's grants with the real values at
// that moment. A refusal is recorded, printed on the command's stderr, and
// stops the whole command: its context is cancelled, so nothing after the
// refused step runs and the programs still running are killed.

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"

	"mvdan.cc/sh/v3/expand"
	"mvdan.cc/sh/v3/interp"
	"mvdan.cc/sh/v3/syntax"

	"github.com/wardenrt/warden/builtin/internal/argguard"
	"github.com/wardenrt/warden/builtin/internal/gitcfg"
	"github.com/wardenrt/warden/builtin/internal/proc"
	"github.com/wardenrt/warden/runtime/capability"
	"github.com/wardenrt/warden/runtime/gate"
	"github.com/wardenrt/warden/runtime/resource"
	"github.com/wardenrt/warden/runtime/sandbox"
	"github.com/wardenrt/warden/runtime/tool"
)

var (
	// errDenied stops the interpreter after a run-time refusal.
	errDenied = errors.New("refused by warden")
	// errEnded cancels what is left (background jobs) when the
	// command ends.
	errEnded = errors.New("the shell command ended")
	// errBrokenPipe kills a program whose output nobody reads any more
	// (the reader of its pipe exited), as SIGPIPE would.
	errBrokenPipe = errors.New("broken pipe")
)

// denial is the first run-time refusal of a call.
type denial struct {
	code          tool.Code // CAPABILITY_DENIED, or POLICY_DENIED (require_sandbox)
	message, hint string
	missing       []string // the grant that would allow it, if one would
}

// runResult is what running a command produced.
type runResult struct {
	exitCode  int
	stdout    *proc.CappedBuffer
	stderr    *proc.CappedBuffer
	timedOut  bool
	cancelled bool
	denial    *denial
	notFound  []string
	warnings  []string
	path      string
	// limit names the resource limit a program hit, if one did.
	limit   string
	refused *tool.Error // the call was refused before anything ran
}

// run is the state of one running command, shared by its handlers
// (which run concurrently: pipes, background jobs).
type run struct {
	grants    capability.Set
	ws        string
	rtCall    *tool.Call
	ctx       context.Context // the call's (where its connections are noted)
	limits    resource.Limits // the call's
	needBox   bool            // require_sandbox
	path      string
	pathDirs  []string
	base      map[string]string // the environment warden built, before the call's env
	hardening []string          // added last to every program's environment (gitHardening)
	gitlinks  []string          // the repository's gitlinks (gitHardening)
	cancel    context.CancelCauseFunc

	mu       sync.Mutex
	closed   bool
	running  int // handler calls under way (programs running)
	inflight sync.WaitGroup
	denial   *denial
	notFound []string
	warned   map[string]bool
	warnings []string
	limit    string

	// The programs' sandbox and way out, made when the first program
	// starts (a command of builtins needs neither).
	boxOnce sync.Once
	box     sandbox.Spec
	net     *proc.Net // guarded by mu once made
	boxErr  error
	// netDone: the call has ended; a way out made after it is closed at
	// once (an interpreter stuck in a builtin may still be starting one).
	netDone bool
}

// sandbox returns every program's sandbox (the call's grants and limits)
// and the call's way out (nil without net grants).
func (st *run) sandbox() (sandbox.Spec, *proc.Net, error) {
	st.boxOnce.Do(func() {
		st.box, st.boxErr = proc.BoxFor(st.rtCall, st.pathDirs)
		if st.boxErr == nil {
			n, err := proc.NewNet(st.ctx, st.rtCall, nil)
			st.mu.Lock()
			st.net, st.boxErr = n, err
			if st.netDone {
				n.Close()
			}
			st.mu.Unlock()
		}
	})
	st.mu.Lock()
	defer st.mu.Unlock()
	return st.box, st.net, st.boxErr
}

// gitHardening is the call's hardening: when its programs may run git and
// git may find a repository from the workspace, with what turns off the
// programs the repository's configuration names (gitcfg.Programs.Settings,
// which refuses a configuration file the call could change) and that
// repository as the only one git may use. A repository with gitlinks
// refuses a call that starts git by name (startsGit): git runs git in
// them, with their own configuration, which the call could change.
func (st *run) gitHardening(ctx context.Context, plan *analysis) ([]string, *tool.Error) {
	git := st.lookPath("git")
	execs := slices.ContainsFunc(st.grants.Grants(), func(g capability.Grant) bool { return g.Kind() == capability.Exec })
	if git == "" || !execs || !gitcfg.RepositoryNear(st.ws) {
		return hardening(), nil
	}
	box, _, err := st.sandbox()
	p := gitcfg.Programs{Git: git, Dir: st.ws, Path: st.path, Vars: st.base, Hardening: hardening(), Box: box, RequireBox: st.needBox,
		Hint: "use the git tools, which read the repository without its programs, or run the command without granting git",
		Writable: func(c string) bool {
			_, prot := st.rtCall.Protect.Match(st.ws, c)
			return st.grants.Allows(capability.Need{Kind: capability.FSWrite, Resource: c}) && !protected(st.ws, c) && !prot
		}}
	if err != nil || !p.Runnable() { // a sandbox that cannot be made starts no program: start says why
		return hardening(), nil
	}
	found, e := p.Settings(ctx)
	if e != nil {
		return nil, e
	}
	st.gitlinks = found.Gitlinks
	if plan != nil && startsGit(plan.programs) {
		if e := st.submodulesRefusal(); e != nil {
			return nil, e
		}
	}
	return hardeningWith(found), nil
}

// programPathRefusal refuses a program named by a path (a launcher's
// subject, a program of an inner script, or one the interpreter starts)
// unless it is the program of that name warden finds on its PATH: a
// relative path, or an absolute one to another file. A link in the
// workspace to a granted program runs that program — the sandbox's
// execute right follows it — under a name the checks that go by name (the
// argument guards, command rules, git's) would not know. A name known only
// at run time is checked when the interpreter starts it, or is opaque.
func (st *run) programPathRefusal(progs []tool.Program) *tool.Error {
	for _, p := range progs {
		if p.Opaque || len(p.Argv) == 0 || p.IsDynamic(0) || !strings.Contains(p.Argv[0], "/") {
			continue
		}
		name, base := p.Argv[0], filepath.Base(p.Argv[0])
		if !filepath.IsAbs(name) {
			return tool.Errorf(tool.CodeCapabilityDenied, "name the program without a path (exec:"+base+"); warden finds it on "+st.path,
				"program %s is a relative path: warden never runs programs from the workspace or a relative directory", name)
		}
		path := st.lookPath(base)
		if path == "" {
			return tool.Errorf(tool.CodeCommandNotFound, "warden runs only programs on "+st.path+", by their names",
				"program %s: there is no %s on warden's PATH", name, base)
		}
		a, errA := os.Stat(name)
		b, errB := os.Stat(path)
		if errA != nil || errB != nil || !os.SameFile(a, b) {
			return tool.Errorf(tool.CodeCapabilityDenied, "call it as "+base+"; warden runs only programs on "+st.path,
				"program %s is not the %s warden finds on its PATH", name, base)
		}
	}
	return nil
}

// launchedArgsRefusal applies the argument guards to the programs other
// programs launch (a launcher's subject, a program of an inner script,
// what xargs builds), as the interpreter applies them to the programs it
// starts: a guarded program's words are checked where they are known, and
// a guarded program given a word known only when it runs — a variable of
// an inner script, what xargs reads — is refused, wherever the word
// stands (after a "--" too: find reads its expression after one, and a
// "--" may be an option's value, after which git reads options again).
//
// Each such program's name must be granted too (exec:NAME): the sandbox
// lets a program be started by any link to a granted file (rbash, a link
// to bash), so the name is warden's to check, as it is for what the
// interpreter starts.
func launchedArgsRefusal(grants capability.Set, progs []tool.Program) *tool.Error {
	for _, p := range progs {
		if p.Opaque || len(p.Argv) == 0 || p.IsDynamic(0) {
			continue
		}
		base := filepath.Base(p.Argv[0])
		if need := (capability.Need{Kind: capability.Exec, Resource: base}); !grants.Allows(need) {
			return tool.NeedsGrants([]string{need.String()}, "program %s is not granted (%s starts it)", quote(p.Argv[0]), shellShort(p.Argv))
		}
		if !argguard.Guarded(base) {
			continue
		}
		for i, w := range p.Argv[1:] {
			if p.IsDynamic(i + 1) {
				return tool.Errorf(tool.CodeCapabilityDenied, "give "+base+" its words in the command itself (a for loop of the command, not xargs or an inner script, when they come from a list)",
					"%s refused: it is launched with a word known only when it runs (%s), which could be an option that makes it run a program or write a file", shellShort(p.Argv), w)
			}
		}
		if g := argguard.Check(base, p.Argv[1:]); g.Reason != "" {
			return tool.Errorf(tool.CodeCapabilityDenied, g.Hint, "%s refused: %s", shellShort(p.Argv), g.Reason)
		}
	}
	return nil
}

// startsGit reports whether one of the programs the command starts, as
// the command rules see them, is git. (An opaque one may be too, but a
// rule allowing it allows whatever it runs.)
func startsGit(progs []tool.Program) bool {
	return slices.ContainsFunc(progs, func(p tool.Program) bool {
		return !p.Opaque && len(p.Argv) > 0 && filepath.Base(p.Argv[0]) == "git"
	})
}

// submodulesRefusal refuses git started from the shell in a repository
// with gitlinks (nil without).
func (st *run) submodulesRefusal() *tool.Error {
	if len(st.gitlinks) == 0 {
		return nil
	}
	shown := st.gitlinks[:min(len(st.gitlinks), 3)]
	return tool.Errorf(tool.CodePolicyDenied, "use the git tools for this repository, or run the command without git",
		"the repository has submodules (%s): git started from the shell runs git inside them, with their own configuration, which the command could change (a submodule's .git is in the work tree), so git is not started",
		strings.Join(shown, ", "))
}

// closeNet closes the call's way out, now or as soon as it is made.
func (st *run) closeNet() {
	st.mu.Lock()
	defer st.mu.Unlock()
	st.netDone = true
	st.net.Close()
}

func (s *Shell) environ() []string {
	if s.Environ != nil {
		return s.Environ()
	}
	return os.Environ()
}

// execute runs a prepared command through the interpreter.
func (s *Shell) execute(ctx context.Context, c *tool.Call, sc *call) *runResult {
	path := s.pathValue(c.Workspace)
	st := &run{grants: c.Grants, ws: c.Workspace, path: path, warned: map[string]bool{},
		rtCall: c, ctx: ctx, limits: c.Limits, needBox: c.RequireSandbox}
	if path != "" {
		st.pathDirs = strings.Split(path, ":")
	}
	env := st.buildEnv(s.environ(), sc.args.Env)
	res := &runResult{
		stdout: &proc.CappedBuffer{Max: s.maxOutput()}, stderr: &proc.CappedBuffer{Max: s.maxOutput()}, path: path,
	}
	tctx, cancelT := context.WithTimeout(ctx, sc.timeout)
	defer cancelT()
	st.hardening, res.refused = st.gitHardening(tctx, sc.plan)
	if res.refused == nil && sc.plan != nil {
		res.refused = st.programPathRefusal(sc.plan.programs)
	}
	if res.refused != nil {
		st.closeNet()
		return res
	}
	// The interpreter opens files named sh-interp-* in its temporary
	// directory without the open handler (they are its FIFOs for <(…)), so
	// it gets a temporary directory where nothing can exist; its TMPDIR
	// variable is restored below, before the command runs.
	interpEnv := append(slices.Clone(env), "TMPDIR="+noTempDir)

	rctx, cancel := context.WithCancelCause(tctx)
	defer cancel(nil)
	st.cancel = cancel

	r, err := interp.New(
		interp.Env(expand.ListEnviron(interpEnv...)),
		interp.Dir(sc.cwd),
		interp.StdIO(nil, res.stdout, res.stderr),
		interp.ExecHandlers(func(interp.ExecHandlerFunc) interp.ExecHandlerFunc { return st.exec }),
		interp.OpenHandler(st.open),
		interp.StatHandler(st.stat),
		interp.AccessHandler(st.access),
		interp.ReadDirHandler2(st.readDir),
		interp.CallHandler(st.call),
	)
	if err != nil {
		fmt.Fprintf(res.stderr, "warden: cannot start the interpreter: %v\n", err)
		res.exitCode = 2
		return res
	}
	r.Reset()
	if err := r.Run(rctx, st.tmpdirPrelude()); err != nil {
		fmt.Fprintf(res.stderr, "warden: cannot prepare the interpreter: %v\n", err)
		res.exitCode = 2
		return res
	}
	done := make(chan error, 1)
	go func() { done <- r.Run(rctx, sc.file) }()
	var runErr error
	var stopBy time.Time
	select {
	case runErr = <-done:
		stopBy = time.Now().Add(stopGrace)
	case <-rctx.Done():
		stopBy = time.Now().Add(stopGrace)
		select {
		case runErr = <-done:
		case <-time.After(time.Until(stopBy)):
			// The interpreter is stuck in a builtin; its programs are
			// being killed, and the call returns without it.
			runErr = rctx.Err()
		}
	}
	res.timedOut = errors.Is(tctx.Err(), context.DeadlineExceeded) && ctx.Err() == nil
	res.cancelled = ctx.Err() != nil
	// Background jobs the command did not wait for are killed with it.
	cancel(errEnded)
	if left := st.close(stopBy); left > 0 && !res.timedOut && !res.cancelled && st.denial == nil {
		st.warn(fmt.Sprintf("%d program(s) still running in the background when the command ended were killed; use wait to wait for background jobs", left))
	}
	st.closeNet()
	if bytes.Contains(res.stderr.Bytes(), []byte("detected dubious ownership")) {
		st.warn("git from the shell uses only the workspace's own repository (warden's setting, not the files' owner: another repository's configuration can name programs for git to run); use the git tools there instead of adding a safe.directory")
	}

	st.mu.Lock()
	res.denial, res.notFound, res.warnings = st.denial, st.notFound, st.warnings
	res.limit = st.limit
	st.mu.Unlock()
	var es interp.ExitStatus
	switch {
	case res.denial != nil:
		res.timedOut, res.cancelled = false, false
		res.exitCode = 126
	case res.timedOut || res.cancelled:
		res.exitCode = -1
	case runErr == nil:
		res.exitCode = 0
	case errors.As(runErr, &es):
		res.exitCode = int(es)
	default:
		fmt.Fprintf(res.stderr, "warden: %v\n", runErr)
		res.exitCode = 2
	}
	return res
}

// noTempDir is the interpreter's own temporary directory: a path under
// a file, so no FIFO, file or symlink can ever be created in it.
const noTempDir = "/dev/null/warden-shell-no-tmp"

// tmpdirPrelude gives TMPDIR back the value warden built (or unsets it).
func (st *run) tmpdirPrelude() *syntax.Stmt {
	src := "unset TMPDIR"
	if v, ok := st.base["TMPDIR"]; ok {
		if q, err := syntax.Quote(v, syntax.LangBash); err == nil {
			src = "export TMPDIR=" + q
		}
	}
	f, err := syntax.NewParser().Parse(strings.NewReader(src), "")
	if err != nil || len(f.Stmts) != 1 {
		f, _ = syntax.NewParser().Parse(strings.NewReader("unset TMPDIR"), "")
	}
	return f.Stmts[0]
}

// enter registers a handler call; false once the command has ended.
func (st *run) enter() bool {
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.closed {
		return false
	}
	st.running++
	st.inflight.Add(1)
	return true
}

// programs is how many handler calls (programs) are under way.
func (st *run) programs() uint64 {
	st.mu.Lock()
	defer st.mu.Unlock()
	return uint64(st.running)
}

// leave ends a handler call registered by enter.
func (st *run) leave() {
	st.mu.Lock()
	st.running--
	st.mu.Unlock()
	st.inflight.Done()
}

// close stops new handler calls and waits (until stopBy) for the running
// ones, whose programs the cancelled context is killing. It returns how many
// were running when it was called.
func (st *run) close(stopBy time.Time) int {
	st.mu.Lock()
	st.closed = true
	left := st.running
	st.mu.Unlock()
	done := make(chan struct{})
	go func() { st.inflight.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(time.Until(stopBy)):
	}
	return left
}

// refuse records a run-time refusal, says so on the command's stderr and
// stops the command.
func (st *run) refuse(hc interp.HandlerContext, message, hint string) error {
	return st.refuseCode(hc, tool.CodeCapabilityDenied, message, hint)
}

func (st *run) refuseCode(hc interp.HandlerContext, code tool.Code, message, hint string) error {
	return st.deny(hc, &denial{code: code, message: message, hint: hint})
}

// refuseNeed refuses what need, which the grants do not allow, would
// have allowed: the denial names the grant that would (noGrant when none
// can).
func (st *run) refuseNeed(hc interp.HandlerContext, message string, need capability.Need, noGrant string) error {
	d := &denial{code: tool.CodeCapabilityDenied, message: message, hint: noGrant}
	if g := need.Hint(st.ws); g != "" {
		d.missing = []string{g}
		d.hint = tool.GrantsHint(d.missing)
	}
	return st.deny(hc, d)
}

func (st *run) deny(hc interp.HandlerContext, d *denial) error {
	st.mu.Lock()
	if st.denial == nil {
		st.denial = d
	}
	st.mu.Unlock()
	if hc.Stderr != nil {
		fmt.Fprintf(hc.Stderr, "warden: %s: %s (%s)\n", d.code, d.message, d.hint)
	}
	st.cancel(errDenied)
	return errDenied
}

func (st *run) warn(w string) {
	st.mu.Lock()
	defer st.mu.Unlock()
	if !st.warned[w] {
		st.warned[w] = true
		st.warnings = append(st.warnings, w)
	}
}

// exec is the exec handler: every program the command starts comes here.
func (st *run) exec(ctx context.Context, args []string) error {
	hc := interp.HandlerCtx(ctx)
	if !st.enter() {
		return interp.ExitStatus(128 + int(syscall.SIGKILL))
	}
	defer st.leave()
	// The process limit holds for the programs the command runs at once
	// (background jobs), as it does inside each of them.
	if lim := st.limits.WithDefaults().Processes; st.programs() > lim {
		return st.refuseCode(hc, tool.CodeResourceLimit, fmt.Sprintf("%s was not started: the command already runs %d programs, its process limit", args[0], lim),
			"raise limits.processes in the policy rule for shell, or wait for background jobs")
	}

	name := args[0]
	base := name
	if strings.Contains(name, "/") {
		if !filepath.IsAbs(name) {
			return st.refuse(hc, fmt.Sprintf("program %s is a relative path: warden never runs programs from the workspace or a relative directory", name),
				"name the program without a path (exec:"+filepath.Base(name)+"); warden finds it on "+st.path)
		}
		base = filepath.Base(name)
	}
	need := capability.Need{Kind: capability.Exec, Resource: base}
	if !st.grants.Allows(need) {
		return st.refuseNeed(hc, fmt.Sprintf("program %s is not granted (it was only known when the command ran)", quote(name)), need,
			"no grant can allow this program name")
	}
	path := st.lookPath(base)
	if path == "" {
		st.mu.Lock()
		if !slices.Contains(st.notFound, base) {
			st.notFound = append(st.notFound, base)
		}
		st.mu.Unlock()
		fmt.Fprintf(hc.Stderr, "warden: %s: command not found on %s\n", name, st.path)
		return interp.ExitStatus(127)
	}
	if name != base {
		a, errA := os.Stat(name)
		b, errB := os.Stat(path)
		if errA != nil || errB != nil || !os.SameFile(a, b) {
			return st.refuse(hc, fmt.Sprintf("program %s is not the %s warden finds on its PATH (%s)", name, base, path),
				"call it as "+base+"; warden runs only programs on "+st.path)
		}
	}
	if e := st.rtCall.CheckPrograms(subjects(tool.Program{Argv: args})...); e != nil {
		return st.refuseCode(hc, e.Code, e.Message, e.Hint)
	}
	launched := subjects(tool.Program{Argv: args})
	if e := st.programPathRefusal(launched); e != nil {
		return st.refuseCode(hc, e.Code, e.Message, e.Hint)
	}
	if e := launchedArgsRefusal(st.grants, launched[1:]); e != nil {
		return st.refuseCode(hc, e.Code, e.Message, e.Hint)
	}
	if startsGit(append([]tool.Program{{Argv: args}}, launched...)) {
		if e := st.submodulesRefusal(); e != nil {
			return st.refuseCode(hc, e.Code, e.Message, e.Hint)
		}
	}
	if e := launchEnvRefusal(tool.Program{Argv: args}, st.grants); e != nil {
		return st.refuseCode(hc, e.Code, e.Message, e.Hint)
	}
	g := argguard.Check(base, args[1:])
	if g.Reason != "" {
		return st.refuse(hc, fmt.Sprintf("%s refused: %s", shellShort(args), g.Reason), g.Hint)
	}
	if err := st.checkWrites(hc, args, g.Writes); err != nil {
		return err
	}
	if d, err := capability.ResolvePath(st.ws, hc.Dir); err != nil || !st.grants.Allows(capability.Need{Kind: capability.FSRead, Resource: d}) {
		return st.refuseNeed(hc, fmt.Sprintf("%s would run in %s, which is outside the fs.read grants", base, hc.Dir), capability.Need{Kind: capability.FSRead, Resource: d}, "")
	}
	env, msg := st.childEnv(hc.Env, base)
	if msg != "" {
		return st.refuse(hc, msg, "leave it unset; variables that change what programs load need an exact env:NAME grant, and PATH is fixed")
	}
	if eg, err := capability.Parse("exec:" + base); err == nil {
		if why := eg.Broad(); why != "" {
			st.warn(why)
		}
	}
	for _, w := range argguard.RiskWarnings(base, args[1:]) {
		st.warn(w)
	}
	return st.start(ctx, hc, name, path, args, env)
}

// checkWrites checks the files a program's arguments say it writes (the
// guard's writes): each must resolve, be granted fs.write, and be neither
// warden-protected nor on the policy's protect: list. A refusal is the
// error.
func (st *run) checkWrites(hc interp.HandlerContext, args, writes []string) error {
	for _, f := range writes {
		p, err := st.resolve(hc.Dir, f, true)
		if err != nil {
			return st.refuse(hc, fmt.Sprintf("%s would write %s, which cannot be resolved: %v", shellShort(args), f, err), "give a plain path inside the granted tree")
		}
		wn := capability.Need{Kind: capability.FSWrite, Resource: p}
		if !st.grants.Allows(wn) {
			return st.refuseNeed(hc, fmt.Sprintf("%s would write %s, which is not granted", shellShort(args), p), wn, "")
		}
		if protected(st.ws, p) {
			return st.refuse(hc, fmt.Sprintf("%s would write %s: %s", shellShort(args), p, protectedWhy), protectedHint)
		}
		if entry, prot := st.rtCall.Protect.Match(st.ws, p); prot {
			e := gate.ProtectedError(p, entry)
			return st.refuse(hc, fmt.Sprintf("%s would write %s: %s", shellShort(args), p, e.Message), e.Hint)
		}
	}
	return nil
}

// start runs the checked program (name as the command gave it, path as
// found on the PATH) in its sandbox with env, and turns how it ended into
// the interpreter's exit status.
func (st *run) start(ctx context.Context, hc interp.HandlerContext, name, path string, args, env []string) error {
	pctx, pcancel := context.WithCancelCause(ctx)
	defer pcancel(nil)
	broken := func() { pcancel(errBrokenPipe) }
	var end proc.End
	box, pnet, err := st.sandbox()
	if err != nil {
		return st.refuseCode(hc, tool.CodePolicyDenied, fmt.Sprintf("%s was not started: %v", name, err),
			"narrow the policy's protect: and hide: entries (entries with a / need no search of the workspace)")
	}
	spec := proc.Spec{Path: path, Args: args, Dir: hc.Dir, Env: env, Stdin: hc.Stdin, Box: box, Net: pnet, RequireBox: st.needBox, Ended: &end}
	var tail *proc.LimitWatch
	if hc.Stderr != nil {
		tail = &proc.LimitWatch{W: hc.Stderr}
		spec.Stderr = &pipeWriter{w: tail, broken: broken}
	}
	if hc.Stdout != nil {
		spec.Stdout = &pipeWriter{w: hc.Stdout, broken: broken}
	}
	code, err := proc.Run(pctx, spec)
	if errors.Is(err, proc.ErrSandboxRequired) {
		e := proc.SandboxRequiredError(err)
		return st.refuseCode(hc, e.Code, fmt.Sprintf("%s was not started: %s", name, e.Message), e.Hint)
	}
	st.mu.Lock()
	if l := proc.LimitHit(code, end, tail, st.limits.WithDefaults()); l != "" && st.limit == "" {
		st.limit = l
	}
	st.mu.Unlock()
	switch {
	case err == nil:
		if code == 0 {
			return nil
		}
		return interp.ExitStatus(uint8(code))
	case errors.Is(err, proc.ErrKilled):
		if ctx.Err() == nil && errors.Is(context.Cause(pctx), errBrokenPipe) {
			return interp.ExitStatus(128 + int(syscall.SIGPIPE))
		}
		return interp.ExitStatus(128 + int(syscall.SIGKILL))
	default:
		fmt.Fprintf(hc.Stderr, "warden: %s: %v\n", name, err)
		return interp.ExitStatus(126)
	}
}

// pipeWriter passes a program's output on; when the destination fails
// (the reading end of a pipe is gone), it kills the program, as SIGPIPE
// would, instead of leaving it blocked on a full pipe.
type pipeWriter struct {
	w      io.Writer
	broken func()
}

func (p *pipeWriter) Write(b []byte) (int, error) {
	n, err := p.w.Write(b)
	if err != nil {
		p.broken()
	}
	return n, err
}

// lookPath finds a program on the fixed PATH (absolute directories only).
func (st *run) lookPath(base string) string {
	if base == "" || base == "." || base == ".." {
		return ""
	}
	for _, d := range st.pathDirs {
		p := d + "/" + base
		if fi, err := os.Stat(p); err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0 {
			return p
		}
	}
	return ""
}

// buildEnv builds the interpreter's environment: the allowlisted host
// variables, the host variables env: grants name (secret-looking and guarded
// names only through an exact grant), the fixed PATH, then the call's env.
func (st *run) buildEnv(host []string, callEnv map[string]string) []string {
	hostVars := map[string]string{}
	for _, kv := range host {
		k, v, ok := strings.Cut(kv, "=")
		if ok && k != "" {
			hostVars[k] = v
		}
	}
	base := map[string]string{}
	for _, k := range envAllow {
		if v, ok := hostVars[k]; ok {
			base[k] = v
		}
	}
	for k, v := range hostVars {
		if _, done := base[k]; done || k == "PATH" || !envName(k) {
			continue
		}
		if !st.grants.Allows(capability.Need{Kind: capability.Env, Resource: k}) {
			continue
		}
		if (secretName(k) || envGuarded(k) != "") && !exactEnvGrant(st.grants, k) {
			continue
		}
		base[k] = v
	}
	base["PATH"] = st.path
	st.base = base
	all := make(map[string]string, len(base)+len(callEnv))
	for k, v := range base {
		all[k] = v
	}
	for k, v := range callEnv {
		all[k] = v
	}
	out := make([]string, 0, len(all))
	for k, v := range all {
		out = append(out, k+"="+v)
	}
	sort.Strings(out)
	return out
}

// envName reports a valid variable name.
func envName(k string) bool {
	for i, c := range k {
		if c == '_' || c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' || i > 0 && c >= '0' && c <= '9' {
			continue
		}
		return false
	}
	return k != ""
}

// childEnv returns the environment a program gets: the interpreter's
// exported variables, checked, plus the call's hardening. It returns a refusal
// message when a guarded variable was changed for the program.
func (st *run) childEnv(env expand.Environ, prog string) ([]string, string) {
	vars := map[string]string{}
	for name, vr := range env.Each {
		if !vr.IsSet() {
			delete(vars, name)
			continue
		}
		if vr.Exported && vr.Kind == expand.String {
			vars[name] = vr.Str
		}
	}
	for name, val := range vars {
		if name == "PATH" {
			if val != st.path {
				return nil, fmt.Sprintf("the command changed PATH for %s; warden runs programs only with PATH=%s", prog, st.path)
			}
			continue
		}
		why := envGuarded(name)
		if why == "" {
			continue
		}
		if bv, ok := st.base[name]; ok && bv == val {
			continue
		}
		if exactEnvGrant(st.grants, name) {
			continue
		}
		return nil, fmt.Sprintf("the command set %s for %s, which needs an exact env:%s grant: %s", name, prog, name, why)
	}
	vars["PATH"] = st.path
	out := make([]string, 0, len(vars)+len(st.hardening))
	for k, v := range vars {
		out = append(out, k+"="+v)
	}
	sort.Strings(out)
	return append(out, st.hardening...), ""
}

// resolve turns a path the interpreter uses (relative to dir) into the
// absolute, resolved path an fs need carries. With follow false the last
// element is kept (lstat, test -L).
func (st *run) resolve(dir, p string, follow bool) (string, error) {
	if p == "" {
		p = "."
	}
	if !filepath.IsAbs(p) {
		p = filepath.Join(dir, p)
	}
	p = filepath.Clean(p)
	if follow || p == "/" {
		return capability.ResolvePath(st.ws, p)
	}
	parent, err := capability.ResolvePath(st.ws, filepath.Dir(p))
	if err != nil {
		return "", err
	}
	return filepath.Join(parent, filepath.Base(p)), nil
}

// rootFor returns the directory to open an os.Root on for need: the base of
// the most specific grant that allows it, else the workspace when the path
// lies in it (a combination of grants allowed it).
func (st *run) rootFor(need capability.Need) (string, bool) {
	best := ""
	for _, g := range st.grants.Grants() {
		if g.Kind() != need.Kind {
			continue
		}
		b := g.Base(st.ws)
		if b == "" || !within(b, need.Resource) || len(b) <= len(best) {
			continue
		}
		if capability.NewSet(st.ws, g).Allows(need) {
			best = b
		}
	}
	if best == "" && within(st.ws, need.Resource) {
		best = st.ws
	}
	return best, best != ""
}

// inRoot runs fn with an os.Root on the base for need and the path relative
// to it, so the access itself cannot leave the granted tree (a symlink
// swapped in after the check is refused by the root).
func (st *run) inRoot(need capability.Need, fn func(root *os.Root, rel string) error) error {
	base, ok := st.rootFor(need)
	if !ok {
		return fs.ErrPermission
	}
	root, err := os.OpenRoot(base)
	if err != nil {
		return err
	}
	defer root.Close()
	rel, err := filepath.Rel(base, need.Resource)
	if err != nil {
		return err
	}
	return fn(root, rel)
}

// open is the open handler: redirections, source, $(<file).
func (st *run) open(ctx context.Context, path string, flag int, perm os.FileMode) (io.ReadWriteCloser, error) {
	hc := interp.HandlerCtx(ctx)
	switch path {
	case "/dev/null":
		return os.OpenFile(os.DevNull, flag, perm)
	case "/dev/stdout":
		return stream{hc.Stdout}, nil
	case "/dev/stderr":
		return stream{hc.Stderr}, nil
	}
	resolved, err := st.resolve(hc.Dir, path, true)
	if err != nil {
		return nil, &os.PathError{Op: "open", Path: path, Err: err}
	}
	write := flag&(os.O_WRONLY|os.O_RDWR) != 0
	read := flag&os.O_WRONLY == 0
	kinds := []capability.Kind{}
	if read {
		kinds = append(kinds, capability.FSRead)
	}
	if write {
		kinds = append(kinds, capability.FSWrite)
	}
	var need capability.Need
	for _, k := range kinds {
		need = capability.Need{Kind: k, Resource: resolved}
		if !st.grants.Allows(need) {
			_ = st.refuseNeed(hc, fmt.Sprintf("%s %s (%s) is not granted", map[bool]string{true: "writing", false: "reading"}[k == capability.FSWrite], path, resolved), need, "")
			return nil, &os.PathError{Op: "open", Path: path, Err: errDenied}
		}
	}
	if write && protected(st.ws, resolved) {
		_ = st.refuse(hc, fmt.Sprintf("writing %s refused: %s", resolved, protectedWhy), protectedHint)
		return nil, &os.PathError{Op: "open", Path: path, Err: errDenied}
	}
	if entry, hidden := st.rtCall.Hidden(resolved); hidden {
		e := gate.HiddenError(resolved, entry)
		_ = st.refuse(hc, e.Message, e.Hint)
		return nil, &os.PathError{Op: "open", Path: path, Err: errDenied}
	}
	if entry, prot := st.rtCall.Protect.Match(st.ws, resolved); prot && write {
		e := gate.ProtectedError(resolved, entry)
		_ = st.refuse(hc, e.Message, e.Hint)
		return nil, &os.PathError{Op: "open", Path: path, Err: errDenied}
	}
	// The policy's path rules hold for a path only known now ($x, a cd).
	if e := st.rtCall.CheckPath(resolved); e != nil {
		_ = st.refuseCode(hc, e.Code, e.Message, e.Hint)
		return nil, &os.PathError{Op: "open", Path: path, Err: errDenied}
	}
	var f *os.File
	err = st.inRoot(need, func(root *os.Root, rel string) error {
		var oerr error
		f, oerr = root.OpenFile(rel, flag, perm)
		return oerr
	})
	if err != nil {
		return nil, &os.PathError{Op: "open", Path: path, Err: pathErr(err)}
	}
	return f, nil
}

// pathErr returns the cause of a path error (which names a path
// relative to a root), or err itself.
func pathErr(err error) error {
	var pe *os.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

// stream is /dev/stdout or /dev/stderr: the command's current stream.
type stream struct{ w io.Writer }

func (s stream) Read([]byte) (int, error) { return 0, io.EOF }
func (s stream) Write(p []byte) (int, error) {
	if s.w == nil {
		return len(p), nil
	}
	return s.w.Write(p)
}
func (s stream) Close() error { return nil }

// stat is the stat handler (test -e/-f/-d/…, cd): only granted paths exist.
func (st *run) stat(ctx context.Context, name string, follow bool) (fs.FileInfo, error) {
	hc := interp.HandlerCtx(ctx)
	resolved, err := st.resolve(hc.Dir, name, follow)
	if err != nil {
		return nil, &os.PathError{Op: "stat", Path: name, Err: err}
	}
	need := capability.Need{Kind: capability.FSRead, Resource: resolved}
	if !st.grants.Allows(need) {
		return nil, &os.PathError{Op: "stat", Path: name, Err: fs.ErrPermission}
	}
	var fi fs.FileInfo
	err = st.inRoot(need, func(root *os.Root, rel string) error {
		var serr error
		if follow {
			fi, serr = root.Stat(rel)
		} else {
			fi, serr = root.Lstat(rel)
		}
		return serr
	})
	if err != nil {
		return nil, &os.PathError{Op: "stat", Path: name, Err: pathErr(err)}
	}
	return fi, nil
}

// access is the access handler (test -r/-w/-x, cd): reading and searching
// need fs.read, writing fs.write.
func (st *run) access(ctx context.Context, name string, mode interp.AccessMode) error {
	hc := interp.HandlerCtx(ctx)
	resolved, err := st.resolve(hc.Dir, name, true)
	if err != nil {
		return &os.PathError{Op: "access", Path: name, Err: err}
	}
	if mode&(interp.AccessRead|interp.AccessExec) != 0 && !st.grants.Allows(capability.Need{Kind: capability.FSRead, Resource: resolved}) {
		return &os.PathError{Op: "access", Path: name, Err: fs.ErrPermission}
	}
	if mode&interp.AccessWrite != 0 && !st.grants.Allows(capability.Need{Kind: capability.FSWrite, Resource: resolved}) {
		return &os.PathError{Op: "access", Path: name, Err: fs.ErrPermission}
	}
	return interp.DefaultAccessHandler()(ctx, resolved, mode)
}

// readDir is the directory handler of globbing: only granted directories
// are listed.
func (st *run) readDir(ctx context.Context, path string) ([]fs.DirEntry, error) {
	hc := interp.HandlerCtx(ctx)
	resolved, err := st.resolve(hc.Dir, path, true)
	if err != nil {
		return nil, &os.PathError{Op: "readdir", Path: path, Err: err}
	}
	need := capability.Need{Kind: capability.FSRead, Resource: resolved}
	if !st.grants.Allows(need) {
		return nil, &os.PathError{Op: "readdir", Path: path, Err: fs.ErrPermission}
	}
	var entries []fs.DirEntry
	err = st.inRoot(need, func(root *os.Root, rel string) error {
		d, oerr := root.Open(rel)
		if oerr != nil {
			return oerr
		}
		defer d.Close()
		entries, oerr = d.ReadDir(-1)
		return oerr
	})
	if err != nil {
		return nil, &os.PathError{Op: "readdir", Path: path, Err: pathErr(err)}
	}
	sort.Slice(entries, func(i, j int) bool { return entries[i].Name() < entries[j].Name() })
	return entries, nil
}

// call is the call handler, run for every simple command (builtins too):
// cd and pushd may only go where fs.read is granted.
func (st *run) call(ctx context.Context, args []string) ([]string, error) {
	i := 0
	for i < len(args) && (args[i] == "builtin" || args[i] == "command") {
		wrapper := args[i]
		i++
		for wrapper == "command" && i < len(args) && strings.HasPrefix(args[i], "-") && args[i] != "-" {
			if args[i] == "-v" || args[i] == "-V" {
				return args, nil
			}
			i++
		}
	}
	if i >= len(args) || args[i] != "cd" && args[i] != "pushd" {
		return args, nil
	}
	hc := interp.HandlerCtx(ctx)
	rest := args[i+1:]
	if args[i] == "pushd" {
		if len(rest) > 0 && rest[0] == "-n" {
			rest = rest[1:]
		}
		if len(rest) == 0 || strings.HasPrefix(rest[0], "+") || strings.HasPrefix(rest[0], "-") && rest[0] != "-" {
			return args, nil // moves within the stack of directories already checked
		}
	}
	var target string
	switch {
	case len(rest) == 0:
		target = hc.Env.Get("HOME").String()
	case rest[0] == "-":
		target = hc.Env.Get("OLDPWD").String()
	default:
		target = rest[0]
	}
	if target == "" {
		return args, nil
	}
	resolved, err := st.resolve(hc.Dir, target, true)
	if err != nil {
		return args, nil // cd fails by itself
	}
	need := capability.Need{Kind: capability.FSRead, Resource: resolved}
	if !st.grants.Allows(need) {
		return nil, st.refuseNeed(hc, fmt.Sprintf("cd to %s (%s) refused: it is outside the fs.read grants", target, resolved), need, "")
	}
	return args, nil
}
