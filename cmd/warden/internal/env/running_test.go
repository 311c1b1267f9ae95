package env

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/wardenrt/warden/store"
	"github.com/wardenrt/warden/store/storetest"
)

// racingStore is a store in which another process writes a run between
// MarkInterrupted's read of it and its write: as it reads (Run), or while
// it holds the run in a transaction (UpdateRun) — where that write must
// wait for it. between runs once.
type racingStore struct {
	store.Backend
	between func()
	once    sync.Once
}

func (r *racingStore) Run(ctx context.Context, id string) (json.RawMessage, error) {
	doc, err := r.Backend.Run(ctx, id)
	r.once.Do(r.between)
	return doc, err
}

func (r *racingStore) UpdateRun(ctx context.Context, id string, fn func(json.RawMessage) (json.RawMessage, error)) error {
	var wg sync.WaitGroup
	err := r.Backend.UpdateRun(ctx, id, func(doc json.RawMessage) (json.RawMessage, error) {
		r.once.Do(func() {
			wg.Add(1)
			go func() { defer wg.Done(); r.between() }()
		})
		return fn(doc)
	})
	wg.Wait()
	return err
}

func runStatus(t *testing.T, st store.Backend, id string) (status string, resumed int) {
	t.Helper()
	doc, err := st.Run(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	var v struct {
		Status  string `json:"status"`
		Resumed int    `json:"resumed"`
	}
	if err := json.Unmarshal(doc, &v); err != nil {
		t.Fatal(err)
	}
	return v.Status, v.Resumed
}

// TestMarkInterruptedLosesNoFinish: a run that finishes between
// MarkInterrupted's read and its write stays finished.
func TestMarkInterruptedLosesNoFinish(t *testing.T) {
	ctx := context.Background()
	inner := storetest.Open(t, nil)
	const id = "20260101-finish"
	if err := inner.PutRun(ctx, id, json.RawMessage(`{"id":"`+id+`","status":"running"}`)); err != nil {
		t.Fatal(err)
	}
	st := &racingStore{Backend: inner, between: func() {
		if err := inner.PutRun(ctx, id, json.RawMessage(`{"id":"`+id+`","status":"succeeded"}`)); err != nil {
			t.Error(err)
		}
	}}
	if _, err := MarkInterrupted(ctx, st, id, "process 1 ended"); err != nil {
		t.Fatal(err)
	}
	if s, _ := runStatus(t, inner, id); s != "succeeded" {
		t.Fatalf("a run that finished meanwhile is %s", s)
	}
}

// TestRecoverRunsLosesNoResume: a warden starting up finds the mark of a
// dead process's run and marks the run interrupted; meanwhile another
// warden marked it first and resumed it (its own mark, the run running
// again). The resumed run stays running, and its mark stays.
func TestRecoverRunsLosesNoResume(t *testing.T) {
	ctx := context.Background()
	inner := storetest.Open(t, nil)
	e := &Env{home: t.TempDir()}
	const id = "20260101-resume"
	dead := runMark{Run: id, Owner: Owner{PID: os.Getpid(), Host: HostName(), Boot: BootID(), Start: "not-this-process"}}
	b, _ := json.Marshal(dead)
	if err := os.MkdirAll(e.runningDir(), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(e.runningDir(), id), b, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := inner.PutRun(ctx, id, json.RawMessage(`{"id":"`+id+`","status":"running"}`)); err != nil {
		t.Fatal(err)
	}
	// The other warden: it recovers the run, then resumes it (`warden
	// workflow resume`: its mark first, then the run's record).
	other := func() {
		if _, err := MarkInterrupted(ctx, inner, id, "process ended"); err != nil {
			t.Error(err)
		}
		_ = os.Remove(filepath.Join(e.runningDir(), id))
		runs := e.TrackRuns(inner)
		if err := runs.PutRun(ctx, id, json.RawMessage(`{"id":"`+id+`","status":"running","resumed":1}`)); err != nil {
			t.Error(err)
		}
	}
	e.recoverRuns(&racingStore{Backend: inner, between: other})
	if s, n := runStatus(t, inner, id); s != "running" || n != 1 {
		t.Errorf("the resumed run is %s (resumed %d)", s, n)
	}
	var m runMark
	if b, err := os.ReadFile(filepath.Join(e.runningDir(), id)); err != nil || json.Unmarshal(b, &m) != nil || !m.Alive() {
		t.Errorf("the resumed run's mark: %s %v", b, err)
	}
}

// TestRecoverRunsPlantedMarks: what is planted in the running directory —
// a FIFO, a symlink to /dev/zero, a huge file — neither hangs nor swells
// the start of a command that opens the store; it is left alone, and a
// real mark beside it is still recovered.
func TestRecoverRunsPlantedMarks(t *testing.T) {
	ctx := context.Background()
	st := storetest.Open(t, nil)
	e := &Env{home: t.TempDir()}
	dir := e.runningDir()
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := syscallMkfifo(filepath.Join(dir, "20260101-fifo")); err != nil {
		t.Skip("no FIFO here:", err)
	}
	if err := os.Symlink("/dev/zero", filepath.Join(dir, "20260101-zero")); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "20260101-huge"), make([]byte, 1<<20), 0o600); err != nil {
		t.Fatal(err)
	}
	const id = "20260101-real"
	b, _ := json.Marshal(runMark{Run: id, Owner: Owner{PID: os.Getpid(), Host: HostName(), Boot: BootID(), Start: "not-this-process"}})
	if err := os.WriteFile(filepath.Join(dir, id), b, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := st.PutRun(ctx, id, json.RawMessage(`{"id":"`+id+`","status":"running"}`)); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { e.recoverRuns(st); close(done) }()
	select {
	case <-done:
	case <-time.After(time.Minute): // a hang, not a measure: the FIFO has no writer
		t.Fatal("recoverRuns hangs on a planted FIFO")
	}
	if s, _ := runStatus(t, st, id); s != RunInterrupted {
		t.Errorf("the real mark's run is %s", s)
	}
	for _, n := range []string{"20260101-fifo", "20260101-zero", "20260101-huge"} {
		if _, err := os.Lstat(filepath.Join(dir, n)); err != nil {
			t.Errorf("%s was not left alone: %v", n, err)
		}
	}
}
