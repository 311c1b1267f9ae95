package wasm

import (
	"context"
	"encoding/binary"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/wardenrt/warden/runtime/tool"
)

// sleepModule is a module whose export "sleep" (or, with start, whose
// _start: a WASI command) calls WASI poll_oneoff with one relative clock
// subscription of d — what Go's time.Sleep compiles to on wasip1.
func sleepModule(start bool, d time.Duration) []byte {
	sub := make([]byte, 48)
	sub[8] = 0                                         // eventtype clock
	binary.LittleEndian.PutUint32(sub[16:], 1)         // monotonic clock
	binary.LittleEndian.PutUint64(sub[24:], uint64(d)) // relative timeout
	body := []byte{
		opI32Const, 0, // subscriptions at 0
		opI32Const, 48, // events at 48 (32 bytes)
		opI32Const, 1, // one subscription
		opI32Const, 0x80, 0x01, // nevents at 128
		opCall, 0, opDrop,
	}
	name := "sleep"
	if start {
		name = "_start"
	}
	return testModule{
		types: []testFunc{
			{params: []byte{valI32, valI32, valI32, valI32}, results: []byte{valI32}},
			{},
		},
		imports: []testImport{{wasiModule, "poll_oneoff", 0}},
		funcs:   []int{1},
		bodies:  [][]byte{body},
		memory:  []byte{0, 1},
		exports: []testExport{{name, 0, 1}, {"memory", 2, 0}},
		data:    []testData{{0, sub}},
	}.encode()
}

// TestSleepEndsAtDeadline: a guest asking for an hour's sleep is stopped
// at its deadline with TIMEOUT (wazero's own sleep would hold the caller
// for the hour), and at once when the caller cancels; a short sleep
// sleeps its time.
func TestSleepEndsAtDeadline(t *testing.T) {
	ctx := context.Background()
	const deadline = 200 * time.Millisecond
	for _, start := range []bool{false, true} {
		m := compileBytes(t, sleepModule(start, time.Hour), CompileOptions{Limits: Limits{Timeout: deadline}})
		run := func(ctx context.Context) error {
			var err error
			if start {
				_, _, err = m.RunCommand(ctx, nil, CallOptions{})
			} else {
				_, _, err = m.Call(ctx, "sleep", nil, CallOptions{})
			}
			return err
		}
		begin := time.Now()
		err := run(ctx)
		if took := time.Since(begin); took > deadline+deadlineSlack() {
			t.Errorf("command %v: an hour's sleep ended after %v, deadline %v", start, took, deadline)
		}
		wantCode(t, err, tool.CodeTimeout)

		cctx, cancel := context.WithCancel(ctx)
		time.AfterFunc(20*time.Millisecond, cancel)
		begin = time.Now()
		err = run(cctx)
		if took := time.Since(begin); took > deadline || !errors.Is(err, context.Canceled) {
			t.Errorf("command %v: cancelled after 20ms, ended after %v with %v", start, took, err)
		}
	}
	m := compileBytes(t, sleepModule(false, 50*time.Millisecond), CompileOptions{Limits: Limits{Timeout: 5 * time.Second}})
	begin := time.Now()
	if _, _, err := m.Call(ctx, "sleep", nil, CallOptions{}); err != nil {
		t.Fatal(err)
	}
	if took := time.Since(begin); took < 50*time.Millisecond {
		t.Errorf("a 50ms sleep took %v", took)
	}
}

// startLoop is a module whose start section loops forever.
func startLoop() []byte {
	out := []byte("\x00asm\x01\x00\x00\x00")
	out = append(out, section(1, vec([]byte{0x60, 0, 0}))...) // type () -> ()
	out = append(out, section(3, vec([]byte{0}))...)          // func 0: type 0
	out = append(out, section(7, vec(append(wname("call"), 0, 0)))...)
	out = append(out, section(8, []byte{0})...) // start: func 0
	body := []byte{0, opLoop, blockVoid, opBr, 0, opEnd, opEnd}
	out = append(out, section(10, vec(append(uleb(uint64(len(body))), body...)))...)
	return out
}

// TestStartSectionBounded: checking a module (install, approve, tool ls)
// instantiates it once, which runs its start section; one that loops
// fails to load at the module's deadline, even when the caller set none.
func TestStartSectionBounded(t *testing.T) {
	const deadline = 100 * time.Millisecond
	begin := time.Now()
	_, err := engine(t).Compile(context.Background(), startLoop(), CompileOptions{Limits: Limits{Timeout: deadline}})
	if took := time.Since(begin); took > deadline+deadlineSlack() {
		t.Errorf("compile ended after %v, deadline %v", took, deadline)
	}
	if !errors.Is(err, ErrLoad) || !strings.Contains(err.Error(), "start function") {
		t.Fatalf("want ErrLoad naming the start function, got %v", err)
	}
}
