package store

// Tests with several processes sharing one store. The test binary re-execs
// itself as TestHelperProcess with WARDEN_STORE_HELPER naming what to do.

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"
)

const (
	helperEnv     = "WARDEN_STORE_HELPER"
	helperPathEnv = "WARDEN_STORE_PATH"
)

// TestHelperProcess is not a test: it is the child process of the
// multi-process tests.
func TestHelperProcess(t *testing.T) {
	mode := os.Getenv(helperEnv)
	if mode == "" {
		t.Skip("helper process for the multi-process tests")
	}
	if err := runHelper(mode, os.Getenv(helperPathEnv)); err != nil {
		fmt.Fprintln(os.Stderr, "helper:", err)
		os.Exit(3)
	}
	os.Exit(0)
}

// stdoutLine writes one line to stdout with one unbuffered write, so a
// reader never sees half a line even if the process is killed.
var stdoutMu sync.Mutex

func stdoutLine(format string, args ...any) {
	stdoutMu.Lock()
	defer stdoutMu.Unlock()
	os.Stdout.Write([]byte(fmt.Sprintf(format, args...) + "\n"))
}

func runHelper(mode, path string) error {
	ctx := context.Background()
	switch mode {
	case "append":
		// Append forever from 4 goroutines, printing "seq event" after
		// each AppendAudit returns, until killed.
		s, err := Open(path, &Options{Timeout: 10 * time.Second})
		if err != nil {
			return err
		}
		stdoutLine("ready")
		pid := os.Getpid()
		errc := make(chan error)
		for g := range 4 {
			go func() {
				for n := 0; ; n++ {
					ev := fmt.Sprintf(`{"tool":"killtest","pid":%d,"g":%d,"n":%d}`, pid, g, n)
					seq, err := s.AppendAudit(ctx, json.RawMessage(ev))
					if err != nil {
						errc <- err
						return
					}
					stdoutLine("%d %s", seq, ev)
					if g == 0 && n%4 == 0 {
						// Other writes share the file and its crashes.
						if err := s.PutMemory(ctx, "kill", strconv.Itoa(n%50), ev); err != nil {
							errc <- err
							return
						}
					}
				}
			}()
		}
		return <-errc

	case "upgrade":
		return upgradeHelper(path)

	case "hold":
		// Do one operation and keep the file open and locked (Linger)
		// until stdin is closed.
		s, err := Open(path, &Options{Linger: time.Hour})
		if err != nil {
			return err
		}
		if _, err := s.AppendAudit(ctx, json.RawMessage(`{"tool":"hold"}`)); err != nil {
			return err
		}
		stdoutLine("ready")
		io.Copy(io.Discard, os.Stdin)
		return s.Close()

	case "serve":
		// Keep one Store open and run commands from stdin:
		// "append EVENT", "put NS KEY VALUE", "appendn N".
		linger, _ := time.ParseDuration(os.Getenv("WARDEN_STORE_LINGER"))
		s, err := Open(path, &Options{Timeout: 10 * time.Second, Linger: linger})
		if err != nil {
			return err
		}
		stdoutLine("ready")
		sc := bufio.NewScanner(os.Stdin)
		for sc.Scan() {
			cmd, arg, _ := strings.Cut(sc.Text(), " ")
			var err error
			var seq uint64
			switch cmd {
			case "append":
				seq, err = s.AppendAudit(ctx, json.RawMessage(arg))
			case "put":
				f := strings.SplitN(arg, " ", 3)
				err = s.PutMemory(ctx, f[0], f[1], f[2])
			case "appendn":
				n, _ := strconv.Atoi(arg)
				for i := 0; i < n && err == nil; i++ {
					seq, err = s.AppendAudit(ctx, json.RawMessage(fmt.Sprintf(`{"tool":"appendn","pid":%d,"i":%d}`, os.Getpid(), i)))
				}
			default:
				err = fmt.Errorf("unknown command %q", cmd)
			}
			if err != nil {
				stdoutLine("err %v", err)
			} else {
				stdoutLine("ok %d", seq)
			}
		}
		return s.Close()
	}
	return fmt.Errorf("unknown helper mode %q", mode)
}

// child is a running helper process.
type child struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser
	lines chan string // stdout lines; closed at EOF
}

func startChild(t *testing.T, mode, path string, env ...string) *child {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestHelperProcess$", "-test.count=1")
	cmd.Env = append(os.Environ(), append(env, helperEnv+"="+mode, helperPathEnv+"="+path)...)
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	c := &child{cmd: cmd, stdin: stdin, lines: make(chan string, 1024)}
	go func() {
		defer close(c.lines)
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			c.lines <- sc.Text()
		}
	}()
	return c
}

// expect reads the next line, failing the test at EOF.
func (c *child) expect(t *testing.T) string {
	t.Helper()
	line, ok := <-c.lines
	if !ok {
		t.Fatalf("helper %d exited early: %v", c.cmd.Process.Pid, c.cmd.Wait())
	}
	return line
}

// finish closes stdin and waits for a clean exit.
func (c *child) finish(t *testing.T) {
	t.Helper()
	c.stdin.Close()
	for range c.lines {
	}
	if err := c.cmd.Wait(); err != nil {
		t.Errorf("helper %d: %v", c.cmd.Process.Pid, err)
	}
}

// TestKillDuringAppend kills a process appending audit records with
// SIGKILL at random moments, 200 times, on the same store. After each kill
// the log must verify and hold every record the child saw acknowledged.
func TestKillDuringAppend(t *testing.T) {
	iterations := 200
	if testing.Short() {
		iterations = 20
	}
	path := filepath.Join(t.TempDir(), "warden.db")
	randSeed := uint64(time.Now().UnixNano())
	t.Logf("random source %d", randSeed)
	rng := rand.New(rand.NewPCG(randSeed, 0))
	ctx := context.Background()

	acked := make(map[uint64]string)
	var withAcks, beforeReady int
	for i := range iterations {
		c := startChild(t, "append", path)
		// Kill at 0-30ms after start for a quarter of the runs (this
		// catches opening and creating the store), else 0-30ms after
		// the child said it is ready (this catches appends).
		fromStart := i%4 == 0
		delay := time.Duration(rng.Int64N(int64(30 * time.Millisecond)))
		var lines []string
		if fromStart {
			time.Sleep(delay)
		} else {
			line, ok := <-c.lines
			if ok {
				lines = append(lines, line)
			}
			time.Sleep(delay)
		}
		if err := c.cmd.Process.Signal(syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		for line := range c.lines {
			lines = append(lines, line)
		}
		err := c.cmd.Wait()
		if ws, ok := c.cmd.ProcessState.Sys().(syscall.WaitStatus); !ok || !ws.Signaled() {
			t.Fatalf("iteration %d: child was not killed but exited: %v", i, err)
		}

		ready, n := false, 0
		for _, line := range lines {
			if line == "ready" {
				ready = true
				continue
			}
			seqText, ev, ok := strings.Cut(line, " ")
			seq, err := strconv.ParseUint(seqText, 10, 64)
			if !ok || err != nil {
				t.Fatalf("iteration %d: bad line %q", i, line)
			}
			if prev, dup := acked[seq]; dup {
				t.Fatalf("iteration %d: seq %d acknowledged twice: %s and %s", i, seq, prev, ev)
			}
			acked[seq] = ev
			n++
		}
		if !ready {
			beforeReady++
		}
		if n > 0 {
			withAcks++
		}

		s, err := Open(path, &Options{Linger: -1, Timeout: 5 * time.Second})
		if err != nil {
			t.Fatalf("iteration %d: reopening after the kill: %v", i, err)
		}
		if rep, err := s.VerifyAudit(ctx); err != nil {
			t.Fatalf("iteration %d: after the kill the log does not verify: %v (%+v)", i, err, rep)
		}
		for _, line := range lines {
			seqText, ev, ok := strings.Cut(line, " ")
			if !ok {
				continue
			}
			seq, _ := strconv.ParseUint(seqText, 10, 64)
			rec, err := s.AuditRecord(ctx, seq)
			if err != nil || string(rec.Event) != ev {
				t.Fatalf("iteration %d: acknowledged record %d = %s, %v; want %s", i, seq, rec.Event, err, ev)
			}
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
	}

	// Every acknowledged record of every iteration is still there.
	s, err := Open(path, &Options{Linger: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	recs, err := s.ListAudit(ctx, AuditFilter{})
	if err != nil {
		t.Fatal(err)
	}
	found := 0
	for _, r := range recs {
		if ev, ok := acked[r.Seq]; ok {
			if string(r.Event) != ev {
				t.Errorf("record %d = %s, acknowledged as %s", r.Seq, r.Event, ev)
			}
			found++
		}
	}
	if found != len(acked) {
		t.Errorf("%d acknowledged records, %d found", len(acked), found)
	}
	// The file itself is consistent (bbolt's own check of every page).
	db, err := bolt.Open(path, 0o600, &bolt.Options{ReadOnly: true, Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	db.View(func(tx *bolt.Tx) error {
		for err := range tx.Check() {
			t.Errorf("bbolt check after the kills: %v", err)
		}
		return nil
	})
	t.Logf("%d kills: %d before the child was ready, %d after at least one acknowledged append; %d acknowledged records, %d records in the log",
		iterations, beforeReady, withAcks, len(acked), len(recs))
	// The test means nothing if the kills never land during appends.
	if withAcks < iterations/4 {
		t.Errorf("only %d of %d children had an append acknowledged before the kill", withAcks, iterations)
	}
}

// TestLockedByAnotherProcess: while another process holds the store, 100 of
// 100 attempts to use it fail with ErrLocked within Timeout + 200ms.
func TestLockedByAnotherProcess(t *testing.T) {
	const (
		attempts = 100
		timeout  = 100 * time.Millisecond
		slack    = 200 * time.Millisecond
		workers  = 2
	)
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "warden.db")
	// Stores opened before the holder starts; they release the file
	// after each operation.
	stores := make([]*Store, workers)
	for w := range stores {
		s, err := Open(path, &Options{Timeout: timeout, Linger: -1})
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		stores[w] = s
	}
	holder := startChild(t, "hold", path)
	defer holder.finish(t)
	if line := holder.expect(t); line != "ready" {
		t.Fatalf("holder said %q", line)
	}

	type result struct {
		what    string
		err     error
		start   time.Time
		elapsed time.Duration
	}
	stalls := watchStalls(t)
	results := make(chan result, attempts)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			s := stores[w]
			for j := range attempts / workers {
				r := result{start: time.Now()}
				start := r.start
				switch j % 5 {
				case 0:
					r.what = "Open"
					var s2 *Store
					if s2, r.err = Open(path, &Options{Timeout: timeout}); r.err == nil {
						s2.Close()
					}
				case 1:
					r.what = "AppendAudit"
					_, r.err = s.AppendAudit(ctx, json.RawMessage(`{"tool":"attempt"}`))
				case 2:
					r.what = "GetMemory"
					_, r.err = s.GetMemory(ctx, "ns", "k")
				case 3:
					r.what = "SearchMemory"
					_, r.err = s.SearchMemory(ctx, MemoryQuery{Text: "anything"})
				case 4:
					r.what = "VerifyAudit"
					_, r.err = s.VerifyAudit(ctx)
				}
				r.elapsed = time.Since(start)
				results <- r
			}
		})
	}
	wg.Wait()
	close(results)
	locked := 0
	var maxElapsed, total time.Duration
	for r := range results {
		if errors.Is(r.err, ErrLocked) {
			locked++
		} else {
			t.Errorf("%s while another process holds the store: %v, want ErrLocked", r.what, r.err)
		}
		if r.elapsed > timeout+slack {
			// Only the time this process was able to run counts: on a
			// loaded machine it can be descheduled for hundreds of ms.
			stalled := stalls.during(r.start, r.start.Add(r.elapsed))
			if r.elapsed-stalled > timeout+slack {
				t.Errorf("%s took %v to give up (%v of it with the process stalled), more than Timeout %v + %v", r.what, r.elapsed, stalled, timeout, slack)
			} else {
				t.Logf("%s took %v to give up, but the process could not run for %v of it", r.what, r.elapsed, stalled)
			}
		}
		maxElapsed = max(maxElapsed, r.elapsed)
		total += r.elapsed
	}
	t.Logf("%d of %d attempts got ErrLocked; mean wait %v, max %v (Timeout %v)", locked, attempts, total/attempts, maxElapsed, timeout)
	if locked != attempts {
		t.Errorf("%d of %d attempts got ErrLocked", locked, attempts)
	}
	// The error says what to do.
	_, err := stores[0].GetMemory(ctx, "ns", "k")
	if err == nil || !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), "another warden process") {
		t.Errorf("ErrLocked message %q should name the file and the cause", err)
	}
}

// TestProcessesTakeTurns: two processes, each keeping its Store open the
// whole time, alternately append and write memory; every operation of both
// succeeds, because the file is locked per unit of work, not per Store.
func TestProcessesTakeTurns(t *testing.T) {
	path := filepath.Join(t.TempDir(), "warden.db")
	a := startChild(t, "serve", path, "WARDEN_STORE_LINGER=20ms")
	b := startChild(t, "serve", path, "WARDEN_STORE_LINGER=20ms")
	for _, c := range []*child{a, b} {
		if line := c.expect(t); line != "ready" {
			t.Fatalf("helper said %q", line)
		}
	}
	var want []string
	for round := range 15 {
		for name, c := range map[string]*child{"a": a, "b": b} {
			ev := fmt.Sprintf(`{"tool":"turns","who":%q,"round":%d}`, name, round)
			fmt.Fprintf(c.stdin, "append %s\n", ev)
			line := c.expect(t)
			if line != fmt.Sprintf("ok %d", len(want)+1) {
				t.Fatalf("%s round %d: append: %s, want ok %d", name, round, line, len(want)+1)
			}
			want = append(want, ev)
			fmt.Fprintf(c.stdin, "put %s k%d value from %s\n", name, round, name)
			if line := c.expect(t); !strings.HasPrefix(line, "ok") {
				t.Fatalf("%s round %d: put: %s", name, round, line)
			}
		}
	}
	a.finish(t)
	b.finish(t)

	s, err := Open(path, &Options{Linger: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx := context.Background()
	if rep, err := s.VerifyAudit(ctx); err != nil || rep.HeadSeq != uint64(len(want)) {
		t.Fatalf("VerifyAudit = %+v, %v", rep, err)
	}
	recs, err := s.ListAudit(ctx, AuditFilter{})
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range recs {
		if string(r.Event) != want[i] {
			t.Errorf("record %d = %s, want %s", r.Seq, r.Event, want[i])
		}
	}
	for _, ns := range []string{"a", "b"} {
		if es, err := s.ListMemory(ctx, ns, 0); err != nil || len(es) != 15 {
			t.Errorf("namespace %s has %d entries, %v; want 15", ns, len(es), err)
		}
	}
}

// TestProcessesAppendConcurrently: two processes appending as fast as they
// can (default linger) both finish, and the log is one gapless chain.
func TestProcessesAppendConcurrently(t *testing.T) {
	const each = 100
	path := filepath.Join(t.TempDir(), "warden.db")
	s, err := Open(path, nil) // create it first, so the children only share it
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	var children []*child
	for range 2 {
		c := startChild(t, "serve", path)
		if line := c.expect(t); line != "ready" {
			t.Fatalf("helper said %q", line)
		}
		children = append(children, c)
	}
	for _, c := range children {
		fmt.Fprintf(c.stdin, "appendn %d\n", each)
	}
	for _, c := range children {
		if line := c.expect(t); !strings.HasPrefix(line, "ok ") {
			t.Errorf("helper %d: %s", c.cmd.Process.Pid, line)
		}
		c.finish(t)
	}
	s, err = Open(path, &Options{Linger: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	rep, err := s.VerifyAudit(context.Background())
	if err != nil || rep.Records != 2*each {
		t.Fatalf("VerifyAudit = %+v, %v; want %d records", rep, err, 2*each)
	}
}

// stallWatch records the periods in which this process did not get to
// run: a goroutine sleeps 1ms at a time and notes any much longer gap.
type stallWatch struct {
	mu   sync.Mutex
	gaps [][2]time.Time
}

func watchStalls(t *testing.T) *stallWatch {
	w := &stallWatch{}
	stop := make(chan struct{})
	done := make(chan struct{})
	t.Cleanup(func() { close(stop); <-done })
	go func() {
		defer close(done)
		last := time.Now()
		for {
			select {
			case <-stop:
				return
			default:
			}
			time.Sleep(time.Millisecond)
			now := time.Now()
			if now.Sub(last) > 10*time.Millisecond {
				w.mu.Lock()
				w.gaps = append(w.gaps, [2]time.Time{last, now})
				w.mu.Unlock()
			}
			last = now
		}
	}()
	return w
}

// during returns how long the process was stalled between from and to.
func (w *stallWatch) during(from, to time.Time) time.Duration {
	w.mu.Lock()
	defer w.mu.Unlock()
	var total time.Duration
	for _, g := range w.gaps {
		start, end := max(g[0].UnixNano(), from.UnixNano()), min(g[1].UnixNano(), to.UnixNano())
		if end > start {
			total += time.Duration(end - start)
		}
	}
	return total
}
