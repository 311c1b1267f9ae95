// Package proc starts the programs the core tools run (shell, git, ops):
// each in a process group of its own, under warden's sandbox, with the
// call's way out to the network (Net), and tells how it ended.
package proc

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/bmatcuk/doublestar/v4"

	"github.com/wardenrt/warden/runtime/capability"
	"github.com/wardenrt/warden/runtime/gate"
	"github.com/wardenrt/warden/runtime/resource"
	"github.com/wardenrt/warden/runtime/sandbox"
	"github.com/wardenrt/warden/runtime/tool"
)

// Spec is one program start. Every program a core tool starts (shell,
// git, ops) goes through Run, so they all get the same process-group
// handling and the same sandbox.
type Spec struct {
	Path   string   // absolute path of the program
	Args   []string // argv; Args[0] is the program's name
	Dir    string
	Env    []string
	Stdin  io.Reader // nil = /dev/null
	Stdout io.Writer // nil = discarded
	Stderr io.Writer // nil = discarded
	// Box is what the program may do (see sandbox.Spec); it always runs
	// under it, through warden's sandbox launcher.
	Box sandbox.Spec
	// RequireBox refuses to start the program unless every sandbox
	// protection is in force (the policy's require_sandbox).
	RequireBox bool
	// Net is the call's way out (nil: the program reaches no network).
	Net *Net
	// Ended, when set, is filled with how the program ended.
	Ended *End
}

// End is how a program ended, for telling which limit stopped it.
type End struct {
	Signal syscall.Signal // the signal that ended it, or 0
	// ProcessLimit: its pids cgroup refused a fork at the process limit.
	ProcessLimit bool
}

// ErrSandboxRequired is Run's refusal under require_sandbox.
var ErrSandboxRequired = errors.New("sandbox required")

// hiddenUnheld is Run's refusal of a program whose grants reach a
// path that must be hidden from it (warden's home, a hide: entry) where
// the sandbox cannot hide it (no namespaces to mask it in).
type hiddenUnheld struct{ paths []string }

func (e *hiddenUnheld) Error() string {
	return "hidden paths cannot be held: " + strings.Join(e.paths, ", ")
}
func (e *hiddenUnheld) Unwrap() error { return ErrSandboxRequired }

// SandboxRequiredError is what a tool reports for ErrSandboxRequired (and
// for a hiddenUnheld, which wraps it).
func SandboxRequiredError(err error) *tool.Error {
	s := sandbox.Detect()
	var hu *hiddenUnheld
	if errors.As(err, &hu) {
		return tool.Errorf(tool.CodeCapabilityDenied,
			"narrow the call's fs grants so they do not reach it, or run where user namespaces are available (`warden sandbox check`)",
			"programs are not started: the call's grants reach %s, which must stay hidden from programs, and this machine's sandbox (level %s) cannot hide a path inside a grant",
			strings.Join(hu.paths, ", "), s.Level())
	}
	var why string
	switch {
	case s.ABI == 0:
		why = s.Why
	case s.ABI < 6:
		why = fmt.Sprintf("this kernel offers Landlock ABI %d, and TCP rules need 4, IPC scopes 6", s.ABI)
	case !s.Namespaces:
		why = s.NamespacesWhy
	default:
		why = "a pids cgroup to hold root's process limit cannot be made"
	}
	return tool.Errorf(tool.CodePolicyDenied,
		"run it where Landlock (Linux 6.7 or later, lsm=landlock) and user namespaces are available, or remove require_sandbox from the policy; `warden sandbox check` shows what this machine offers",
		"the policy requires a sandbox (require_sandbox) and this machine's is %s: %s", s.Level(), why)
}

// BoxFor is the sandbox of a program a call starts on its own grants:
// reads and writes under its fs grants, execution of the programs its
// exec grants name (found on pathDirs, with what they need: see
// sandbox.ExecClosure) or of anything for exec:*, the workspace's .git
// and .warden and the policy's protect: paths read-only, its hide: paths
// masked, and the call's limits. The network is Net's. Landlock rules
// are files and directory trees, not patterns, so each grant opens no
// more than it names: a whole tree (DIR/**, **) opens DIR; one path opens
// that file or directory if it exists (not where it would be created);
// any other pattern (*.md, notes/*.txt) opens the files that match it
// now, at most maxBoxMatches of them (a pattern that matches more opens
// nothing), and no directory. A path through a symlink is left out:
// Landlock would open its target, which the grant does not name (the
// launcher checks again as it opens each path).
func BoxFor(c *tool.Call, pathDirs []string) (sandbox.Spec, error) {
	b := sandbox.Spec{Limits: c.Limits}
	var progs []string
	for _, g := range c.Grants.Grants() {
		switch g.Kind() {
		case capability.FSRead:
			b.Read = append(b.Read, grantPaths(g, c.Workspace)...)
		case capability.FSWrite:
			b.Write = append(b.Write, grantPaths(g, c.Workspace)...)
		case capability.Exec:
			if g.Scope() == "*" {
				b.ExecAny = true
			} else if p := lookPathIn(pathDirs, g.Scope()); p != "" {
				progs = append(progs, p)
			}
		}
	}
	if !b.ExecAny {
		b.Exec = sandbox.ExecClosure(progs, pathDirs)
	}
	var err error
	if b.Protect, err = ProtectedPaths(c, b.Write, true); err != nil {
		return b, err
	}
	b.Hide, err = hiddenPaths(c, append(slices.Clone(b.Read), b.Write...))
	return b, err
}

// lookPathIn finds an executable file name in dirs.
func lookPathIn(dirs []string, name string) string {
	if name == "" || strings.Contains(name, "/") {
		return ""
	}
	for _, d := range dirs {
		p := d + "/" + name
		if fi, err := os.Stat(p); err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0 {
			return p
		}
	}
	return ""
}

// Bounds of the search for the paths a policy's protect: and hide: lists
// name (pathrule.List.Resolve): past them a program is not started.
const (
	pathRuleMaxVisit = 200_000
	pathRuleMaxMatch = 1_000
)

// ProtectedPaths are the existing paths a program must not change, among
// those its writable paths reach: the workspace's .git (when git is true)
// — a directory, or a worktree's "gitdir:" file with the git directory it
// names and that directory's common directory — and .warden, and what
// the policy's protect: entries name.
func ProtectedPaths(c *tool.Call, write []string, git bool) ([]string, error) {
	if len(write) == 0 {
		return nil, nil
	}
	ws := c.Workspace
	var cands []string
	if git {
		cands = append(cands, gitDirs(ws)...)
	}
	cands = append(cands, filepath.Join(ws, ".warden"))
	more, err := c.Protect.Resolve(ws, pathRuleMaxVisit, pathRuleMaxMatch)
	if err != nil {
		return nil, fmt.Errorf("the policy's protect: entries: %w", err)
	}
	cands = append(cands, more...)
	var out []string
	for _, p := range cands {
		real, err := filepath.EvalSymlinks(p)
		if err != nil || slices.Contains(out, real) {
			continue
		}
		if slices.ContainsFunc(write, func(w string) bool { return overlaps(w, real) }) {
			out = append(out, real)
		}
	}
	return out, nil
}

// gitDirs are the workspace's .git and, when it is a worktree's "gitdir:"
// file, the git directory it names and that one's common directory (where
// the hooks and the configuration are).
func gitDirs(ws string) []string {
	dotgit := filepath.Join(ws, ".git")
	out := []string{dotgit}
	fi, err := os.Lstat(dotgit)
	if err != nil || !fi.Mode().IsRegular() {
		return out
	}
	b, err := os.ReadFile(dotgit)
	if err != nil {
		return out
	}
	dir, ok := strings.CutPrefix(strings.TrimSpace(string(b)), "gitdir:")
	if !ok {
		return out
	}
	dir = strings.TrimSpace(dir)
	if !filepath.IsAbs(dir) {
		dir = filepath.Join(ws, dir)
	}
	out = append(out, dir)
	if cb, err := os.ReadFile(filepath.Join(dir, "commondir")); err == nil {
		common := strings.TrimSpace(string(cb))
		if !filepath.IsAbs(common) {
			common = filepath.Join(dir, common)
		}
		out = append(out, filepath.Clean(common))
	}
	return out
}

// hiddenPaths are the existing paths the policy's hide: entries name,
// among those the readable paths reach.
func hiddenPaths(c *tool.Call, readable []string) ([]string, error) {
	if c.Hide.Empty() || len(readable) == 0 {
		return nil, nil
	}
	all, err := c.Hide.Resolve(c.Workspace, pathRuleMaxVisit, pathRuleMaxMatch)
	if err != nil {
		return nil, fmt.Errorf("the policy's hide: entries: %w", err)
	}
	var out []string
	for _, p := range all {
		if slices.ContainsFunc(readable, func(r string) bool { return overlaps(r, p) }) {
			out = append(out, p)
		}
	}
	return out, nil
}

// overlaps reports whether a and b are the same path or one lies in the
// other.
func overlaps(a, b string) bool {
	return a == b || a == "/" || b == "/" || strings.HasPrefix(b, a+"/") || strings.HasPrefix(a, b+"/")
}

// maxBoxMatches bounds the files one pattern grant opens in a sandbox.
const maxBoxMatches = 256

// grantPaths are the paths an fs grant opens in a sandbox (see BoxFor).
func grantPaths(g capability.Grant, ws string) []string {
	noLink := func(p string) bool {
		real, err := filepath.EvalSymlinks(p)
		return err == nil && real == p
	}
	if p, ok := g.Exact(ws); ok {
		if noLink(p) {
			return []string{p}
		}
		return nil
	}
	if d, ok := g.Tree(ws); ok {
		if noLink(d) {
			return []string{d}
		}
		return nil
	}
	matches, err := doublestar.FilepathGlob(g.Pattern(ws), doublestar.WithFilesOnly(), doublestar.WithNoFollow())
	if err != nil || len(matches) > maxBoxMatches {
		return nil
	}
	return slices.DeleteFunc(matches, func(p string) bool { return !noLink(p) })
}

// ErrKilled reports that the context ended (deadline or cancellation)
// and the process group was killed.
var ErrKilled = errors.New("killed: the call's deadline passed or it was cancelled")

// pipeDrainWait bounds how long Run waits for output still in flight
// after the process group has been killed.
const pipeDrainWait = time.Second

// Run starts the program in a new process group and waits for it. When it
// exits, the rest of its group (background children) is killed, so a call
// never leaves processes behind; when ctx ends first, the whole group is
// killed at once. It returns the exit status (128+signal when killed by a
// signal), ErrKilled (wrapped) when ctx ended, or an error if the program
// could not start.
func Run(ctx context.Context, p Spec) (int, error) {
	box, err := startBox(ctx, p)
	if err != nil {
		return -1, err
	}
	// What exec.Cmd says of a working directory it cannot enter, said for
	// both ways of starting.
	if p.Dir != "" {
		if _, err := os.Stat(p.Dir); err != nil {
			if pe, ok := err.(*os.PathError); ok {
				pe.Op = "chdir"
			}
			return -1, err
		}
	}
	l, cmd, outR, errR, stdinDone, err := startPooled(ctx, p, &box)
	if err != nil {
		if ctx.Err() != nil {
			return -1, fmt.Errorf("%w: %v", ErrKilled, ctx.Err())
		}
		return -1, err
	}
	if l == nil {
		if l, cmd, outR, errR, err = startFresh(ctx, p, &box); err != nil {
			return -1, err
		}
	} else {
		gate.NoteSandbox(ctx, l.Level)
	}
	defer sandbox.Cleanup(box.Group) // again, in case waitGroup did not run
	defer l.Close()
	pgid := cmd.Process.Pid
	sandbox.Started(pgid, box.Group)
	stopNet := func() {}
	if p.Net != nil {
		stopNet = p.Net.serve(l, filepath.Base(p.Path))
	}
	copies := drain(outR, errR, p.Stdout, p.Stderr)
	killed, limitHit, werr := waitGroup(ctx, cmd, pgid, &box)
	stdinDone()
	stopNet()
	closeDrained(copies, outR, errR)
	return exitStatus(ctx, cmd, p, killed, limitHit, werr)
}

// startFresh starts the program through a launcher started for it (where
// there is no pool: see sandbox.Pooled): for root in a pids cgroup made
// for it.
func startFresh(ctx context.Context, p Spec, box *sandbox.Spec) (*sandbox.Launch, *exec.Cmd, *os.File, *os.File, error) {
	if sandbox.NeedsGroup() {
		// Root: the process limit is a pids cgroup of the program's
		// own. Without one it is not held; require_sandbox refuses that.
		group, err := sandbox.NewGroup(box.Limits.WithDefaults().Processes)
		if err != nil && p.RequireBox {
			return nil, nil, nil, nil, ErrSandboxRequired
		}
		box.Group = group
	}
	l, err := sandbox.Command(p.Path, p.Args, p.Env, *box)
	if err != nil {
		sandbox.Cleanup(box.Group)
		return nil, nil, nil, nil, err
	}
	gate.NoteSandbox(ctx, l.Level)
	cmd := command(l, p)
	outR, errR, err := startPiped(cmd)
	if err != nil {
		l.Close()
		sandbox.Cleanup(box.Group)
		return nil, nil, nil, nil, err
	}
	l.Started()
	return l, cmd, outR, errR, nil
}

// startPooled starts the program through a launcher started ahead of need
// (sandbox.Pooled), or returns a nil launch when there is none to take or
// the one taken could not be sent the program: then it starts afresh.
// stdinDone closes warden's end of the program's input once it ended.
func startPooled(ctx context.Context, p Spec, box *sandbox.Spec) (l *sandbox.Launch, cmd *exec.Cmd, outR, errR *os.File, stdinDone func(), err error) {
	stdinDone = func() {}
	if l, err = sandbox.Pooled(ctx, p.Path, p.Args, p.Env, *box); err != nil || l == nil {
		return nil, nil, nil, nil, stdinDone, err
	}
	var files []*os.File // warden's copies of the program's ends
	defer func() {
		for _, f := range files {
			f.Close()
		}
	}()
	in, inW, err := stdinFile(p.Stdin)
	if err != nil {
		l.Close()
		return nil, nil, nil, nil, stdinDone, err
	}
	if in != p.Stdin {
		files = append(files, in)
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		l.Close()
		closeAll(inW)
		return nil, nil, nil, nil, stdinDone, err
	}
	files = append(files, outW)
	errR, errW, err := os.Pipe()
	if err != nil {
		l.Close()
		closeAll(inW, outR)
		return nil, nil, nil, nil, stdinDone, err
	}
	files = append(files, errW)
	if err := l.Send(p.Dir, in, outW, errW); err != nil {
		l.Close()
		closeAll(inW, outR, errR)
		return nil, nil, nil, nil, stdinDone, nil
	}
	box.Group = l.Group
	if inW != nil {
		go func() {
			_, _ = io.Copy(inW, p.Stdin)
			inW.Close()
		}()
		stdinDone = func() { inW.Close() }
	}
	return l, l.Cmd, outR, errR, stdinDone, nil
}

// stdinFile is the program's standard input, as exec.Cmd makes it:
// /dev/null for none, the file itself for an *os.File, else the read end
// of a pipe whose write end (inW) the caller copies r into.
func stdinFile(r io.Reader) (in, inW *os.File, err error) {
	switch f := r.(type) {
	case nil:
		in, err = os.Open(os.DevNull)
		return in, nil, err
	case *os.File:
		return f, nil, nil // the caller's, sent as it is
	}
	return os.Pipe()
}

func closeAll(fs ...*os.File) {
	for _, f := range fs {
		if f != nil {
			f.Close()
		}
	}
}

// startBox checks what can be checked before anything starts — the
// context, the sandbox require_sandbox asks for, the program, a hide:
// list only a mount namespace holds — and returns the sandbox to start
// the program in: p.Box, with the program itself executable and the
// network bridge's part.
func startBox(ctx context.Context, p Spec) (sandbox.Spec, error) {
	if err := ctx.Err(); err != nil {
		return sandbox.Spec{}, fmt.Errorf("%w: %v", ErrKilled, err)
	}
	if p.RequireBox && !sandbox.Detect().Full() {
		return sandbox.Spec{}, ErrSandboxRequired
	}
	// What exec would say, said here: the launcher can only exit 126.
	if fi, err := os.Stat(p.Path); err != nil {
		return sandbox.Spec{}, err
	} else if fi.IsDir() || fi.Mode()&0o111 == 0 {
		return sandbox.Spec{}, &os.PathError{Op: "exec", Path: p.Path, Err: os.ErrPermission}
	}
	box := p.Box
	// Hiding a path inside a grant takes a mount namespace; without one a
	// program under the grant would read (or change) it.
	if len(box.Hide) > 0 && !sandbox.Detect().Namespaces {
		return sandbox.Spec{}, &hiddenUnheld{paths: box.Hide}
	}
	if !box.ExecAny && !slices.Contains(box.Exec, p.Path) {
		// What warden itself decided to start (git, journalctl, a
		// granted program found on the PATH) may run, with its loader.
		box.Exec = append(slices.Clone(box.Exec), sandbox.ExecClosure([]string{p.Path}, nil)...)
	}
	if p.Net != nil {
		if err := p.Net.box(&box); err != nil {
			return sandbox.Spec{}, err
		}
	}
	return box, nil
}

// command is the command that starts the program through the sandbox's
// launcher l.
func command(l *sandbox.Launch, p Spec) *exec.Cmd {
	cmd := exec.Command(l.Path)
	cmd.Args = l.Args
	cmd.Dir = p.Dir
	cmd.Env = l.Env
	cmd.Stdin = p.Stdin
	cmd.WaitDelay = pipeDrainWait
	cmd.ExtraFiles = l.ExtraFiles
	// A session of its own (a process group to kill, and no controlling
	// terminal: no /dev/tty to read from or push input into), and the
	// namespaces of the sandbox.
	cmd.SysProcAttr = l.SysProcAttr
	return cmd
}

// startPiped starts cmd with its stdout and stderr on pipes of our own
// and returns their read ends: exec.Cmd.Wait would otherwise wait for
// every holder of the pipe (a background grandchild) before returning.
func startPiped(cmd *exec.Cmd) (outR, errR *os.File, err error) {
	outR, outW, err := os.Pipe()
	if err != nil {
		return nil, nil, err
	}
	errR, errW, err := os.Pipe()
	if err != nil {
		outR.Close()
		outW.Close()
		return nil, nil, err
	}
	cmd.Stdout, cmd.Stderr = outW, errW
	if err := cmd.Start(); err != nil {
		outR.Close()
		outW.Close()
		errR.Close()
		errW.Close()
		return nil, nil, err
	}
	outW.Close()
	errW.Close()
	return outR, errR, nil
}

// drain copies the program's output from the pipes into stdout and stderr
// (nil: discarded) until the pipes close.
func drain(outR, errR *os.File, stdout, stderr io.Writer) *sync.WaitGroup {
	var copies sync.WaitGroup
	copyOut := func(r *os.File, w io.Writer) {
		defer copies.Done()
		if w == nil {
			w = io.Discard
		}
		_, _ = io.Copy(w, r)
	}
	copies.Add(2)
	go copyOut(outR, stdout)
	go copyOut(errR, stderr)
	return &copies
}

// waitGroup waits for the program to exit or ctx to end (killed: the
// whole group is killed at once), then kills whatever is left of the
// group, then of the program's pids cgroup (box.Group; limitHit: the
// process limit was reached), and reaps the program.
func waitGroup(ctx context.Context, cmd *exec.Cmd, pgid int, box *sandbox.Spec) (killed, limitHit bool, werr error) {
	// On Linux the program is waited for without being reaped (see
	// waitExit): while it is a zombie its PID, and so the group's ID,
	// cannot be reused, and killing the group cannot hit a stranger.
	exited, reap := waitExit(cmd)
	select {
	case <-exited:
	case <-ctx.Done():
		killed = true
		_ = sandbox.KillGroup(pgid)
		<-exited
	}
	// Whatever is left of the group goes too, then of the program's pids
	// cgroup (processes that left the group), before the leader is reaped.
	_ = sandbox.KillGroup(pgid)
	limitHit = sandbox.Cleanup(box.Group)
	box.Group = ""
	sandbox.Ended(pgid) // before the leader is reaped
	werr = reap()
	return killed, limitHit, werr
}

// closeDrained waits for the output to be copied, at most pipeDrainWait,
// and closes the pipes.
func closeDrained(copies *sync.WaitGroup, outR, errR *os.File) {
	done := make(chan struct{})
	go func() { copies.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(pipeDrainWait):
		// A process that left the group (setsid) still holds a pipe.
		outR.Close()
		errR.Close()
		<-done
	}
	outR.Close()
	errR.Close()
}

// exitStatus is Run's result for a program that ran: ErrKilled when ctx
// ended, else its exit status (128+signal when a signal killed it), with
// p.Ended filled in.
func exitStatus(ctx context.Context, cmd *exec.Cmd, p Spec, killed, limitHit bool, werr error) (int, error) {
	if killed {
		return -1, fmt.Errorf("%w: %v", ErrKilled, ctx.Err())
	}
	code := cmd.ProcessState.ExitCode()
	var sig syscall.Signal
	if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		sig = ws.Signal()
		code = 128 + int(sig)
	}
	if p.Ended != nil {
		*p.Ended = End{Signal: sig, ProcessLimit: limitHit}
	}
	var ee *exec.ExitError
	if werr != nil && !errors.As(werr, &ee) {
		return code, werr
	}
	return code, nil
}

// CappedBuffer keeps the first Max bytes written to it and counts the rest.
// It never blocks or fails a writer, so a flooding program is drained, not
// stalled.
type CappedBuffer struct {
	mu    sync.Mutex
	Max   int
	buf   bytes.Buffer
	total int64
}

func (c *CappedBuffer) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.total += int64(len(p))
	if room := c.Max - c.buf.Len(); room > 0 {
		if len(p) > room {
			c.buf.Write(p[:room])
		} else {
			c.buf.Write(p)
		}
	}
	return len(p), nil
}

// Bytes returns what was kept, without the truncation marker.
func (c *CappedBuffer) Bytes() []byte {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.buf.Bytes()
}

// Truncated reports whether more was written than kept.
func (c *CappedBuffer) Truncated() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.total > int64(c.buf.Len())
}

// String returns what was kept, with a marker saying how much was cut.
func (c *CappedBuffer) String() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	s := c.buf.String()
	if c.total > int64(len(s)) {
		s = fmt.Sprintf("%s\n… [truncated: %d of %d bytes kept]", s, len(s), c.total)
	}
	return s
}

// LimitWatch passes a program's stderr on and keeps its end, to tell which
// resource limit stopped it.
type LimitWatch struct {
	W    io.Writer
	mu   sync.Mutex
	tail []byte
}

const limitWatchKeep = 4 << 10

func (l *LimitWatch) Write(p []byte) (int, error) {
	l.mu.Lock()
	l.tail = append(l.tail, p...)
	if len(l.tail) > limitWatchKeep {
		l.tail = append(l.tail[:0], l.tail[len(l.tail)-limitWatchKeep:]...)
	}
	l.mu.Unlock()
	return l.W.Write(p)
}

func (l *LimitWatch) text() string {
	if l == nil {
		return ""
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	return strings.ToLower(string(l.tail))
}

// LimitHit names the resource limit a program's end shows, or "": the
// signals the kernel sends at the CPU and file size limits (the signal
// itself, not an exit status that merely equals 128+it), a fork refused by
// the program's pids cgroup, or — where nothing else can tell — what a
// program printed last, with a non-zero exit, when fork, allocation or open
// failed.
func LimitHit(code int, end End, stderr *LimitWatch, lim resource.Limits) string {
	switch {
	case !sandbox.LimitsHeld():
		return "" // no limit was set: none stopped it
	case end.Signal == sigXCPU:
		return fmt.Sprintf("CPU time limit (%d s)", lim.CPUSeconds)
	case end.Signal == sigXFSZ:
		return fmt.Sprintf("file size limit (%d MiB)", lim.FileSizeMB)
	case end.ProcessLimit:
		return fmt.Sprintf("process limit (%d)", lim.Processes)
	case code == 0:
		return ""
	}
	t := stderr.text()
	if len(t) > 512 {
		t = t[len(t)-512:]
	}
	has := func(words ...string) bool {
		for _, w := range words {
			if strings.Contains(t, w) {
				return true
			}
		}
		return false
	}
	switch {
	case !sandbox.NeedsGroup() && has("cannot fork", "can't fork", "fork: resource temporarily unavailable", "fork failed", "unable to fork", "fork: retry"):
		return fmt.Sprintf("process limit (%d)", lim.Processes)
	case has("out of memory", "cannot allocate memory", "memory exhausted", "memoryerror", "bad_alloc"):
		return fmt.Sprintf("address space limit (%d MiB)", lim.AddressSpaceMB)
	case has("too many open files"):
		return fmt.Sprintf("open files limit (%d)", lim.OpenFiles)
	}
	return ""
}

// SandboxProbe is what ProbeSandbox found.
type SandboxProbe struct {
	// Started: a program started through the launcher and exited 0.
	Started bool `json:"started"`
	// Confined: the program could not read a file outside its sandbox
	// (false where the level is none: nothing confines it).
	Confined bool   `json:"confined"`
	Error    string `json:"error,omitempty"`
}

// ProbeSandbox starts programs the way the tools do, to show that the
// sandbox works here: /bin/cat of a file the sandbox allows, then of one it
// does not.
func ProbeSandbox(ctx context.Context) SandboxProbe {
	var p SandboxProbe
	dir, err := os.MkdirTemp("", "warden-sandbox-probe-")
	if err != nil {
		p.Error = err.Error()
		return p
	}
	defer os.RemoveAll(dir)
	in, out := filepath.Join(dir, "in"), filepath.Join(dir, "out")
	for _, f := range []string{in, out} {
		if err := os.WriteFile(f, []byte("probe\n"), 0o600); err != nil {
			p.Error = err.Error()
			return p
		}
	}
	cat := "/bin/cat"
	box := sandbox.Spec{Read: []string{in}}
	var stderr bytes.Buffer
	code, err := Run(ctx, Spec{Path: cat, Args: []string{"cat", in}, Box: box, Stderr: &stderr})
	if err != nil || code != 0 {
		p.Error = fmt.Sprintf("%s %s: exit %d %v %s", cat, in, code, err, strings.TrimSpace(stderr.String()))
		return p
	}
	p.Started = true
	code, _ = Run(ctx, Spec{Path: cat, Args: []string{"cat", out}, Box: box})
	p.Confined = code != 0
	return p
}
