package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"sync"
	"syscall"
	"time"

	"github.com/wardenrt/warden/runtime/sandbox"
)

// signalGrace is how long a command has, after SIGINT or SIGTERM, to stop
// by itself (its context is cancelled: programs are killed, the store is
// closed after its last commit) before warden ends it anyway. With the
// time the process takes to exit, warden is gone well within a second,
// whatever it was doing — parsing, compiling a module, waiting for the
// store's lock.
const signalGrace = 500 * time.Millisecond

// signals watches SIGINT and SIGTERM for main. The first cancels the
// command's context; if the command has not returned signalGrace later,
// or at a second signal, warden kills the programs it started and exits.
// The store needs nothing: bbolt's commits are atomic, and an audit
// anchor that lags its log by a commit verifies.
type signals struct {
	ch     chan os.Signal
	cancel context.CancelFunc
	stderr io.Writer
	done   chan struct{}

	mu  sync.Mutex
	got syscall.Signal // the first signal, 0 for none
}

func watchSignals(stderr io.Writer) (context.Context, *signals) {
	ctx, cancel := context.WithCancel(context.Background())
	s := &signals{ch: make(chan os.Signal, 2), cancel: cancel, stderr: stderr, done: make(chan struct{})}
	signal.Notify(s.ch, os.Interrupt, syscall.SIGTERM)
	go s.loop()
	return ctx, s
}

func (s *signals) loop() {
	var grace <-chan time.Time
	for {
		select {
		case sig := <-s.ch:
			sn, _ := sig.(syscall.Signal)
			s.mu.Lock()
			first := s.got == 0
			if first {
				s.got = sn
			}
			s.mu.Unlock()
			if !first {
				s.exit(sn, "a second signal")
			}
			s.cancel()
			grace = time.After(signalGrace)
		case <-grace:
			s.exit(s.first(), fmt.Sprintf("the command did not stop within %s", signalGrace))
		case <-s.done:
			return
		}
	}
}

func (s *signals) first() syscall.Signal {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.got
}

// exit ends warden now: the programs it started are killed first.
func (s *signals) exit(sig syscall.Signal, why string) {
	n := sandbox.KillAll()
	msg := fmt.Sprintf("warden: %s: stopped by %s (%s)", "USER_CANCELLED", signalName(sig), why)
	if n > 0 {
		msg += fmt.Sprintf("; %d program(s) killed", n)
	}
	fmt.Fprintln(s.stderr, msg+" — the store is as of its last commit; `warden audit verify` checks it")
	os.Exit(128 + int(sig))
}

// stop ends the watch and returns the signal that arrived, or 0.
func (s *signals) stop() syscall.Signal {
	signal.Stop(s.ch)
	close(s.done)
	s.cancel()
	return s.first()
}

func signalName(sig syscall.Signal) string {
	switch sig {
	case syscall.SIGINT:
		return "SIGINT"
	case syscall.SIGTERM:
		return "SIGTERM"
	}
	return sig.String()
}
