package postgres_test

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/wardenrt/warden/store"
	"github.com/wardenrt/warden/store/postgres"
)

// TestWatch: a change one host makes to pins, trust, grants or published
// files reaches another host's Watch; a published file reads back.
func TestWatch(t *testing.T) {
	_, _, url := newDB(t)
	a := openStore(t, url, t.TempDir(), &postgres.Options{Host: "a"})
	b := openStore(t, url, t.TempDir(), &postgres.Options{Host: "b"})
	c, cancel := context.WithCancel(ctx)
	changes := make(chan string, 16)
	done := make(chan error, 1)
	go func() { done <- b.Watch(c, func(table string) { changes <- table }) }()
	want := func(table string) {
		t.Helper()
		select {
		case got := <-changes:
			if got != table {
				t.Errorf("change %q, want %q", got, table)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("no notification of %s", table)
		}
	}
	// Watch is listening once a change made after it started arrives:
	// keep changing the pins until the first one does.
	deadline := time.Now().Add(10 * time.Second)
	for len(changes) == 0 && time.Now().Before(deadline) {
		if err := a.PutPin(ctx, "m", json.RawMessage(`{"sha256":"aa"}`)); err != nil {
			t.Fatal(err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	want("pins")
	for len(changes) > 0 {
		<-changes
	}
	if err := a.PutTrust(ctx, "sha256:x", json.RawMessage(`{}`)); err != nil {
		t.Fatal(err)
	}
	want("trust")
	if err := a.PutGrant(ctx, "g", json.RawMessage(`{}`)); err != nil {
		t.Fatal(err)
	}
	want("grants")
	p, err := a.Publish(ctx, "policy.yaml", []byte("version: 1\n"))
	if err != nil {
		t.Fatal(err)
	}
	want("published")
	got, err := b.PublishedFile(ctx, "policy.yaml")
	if err != nil || string(got.Data) != "version: 1\n" || got.SHA256 != p.SHA256 || got.By != "a" {
		t.Errorf("PublishedFile = %+v, %v", got, err)
	}
	if err := a.Unpublish(ctx, "policy.yaml"); err != nil {
		t.Fatal(err)
	}
	want("published")
	if _, err := b.PublishedFile(ctx, "policy.yaml"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("after Unpublish: %v", err)
	}
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Errorf("Watch returned %v", err)
	}
}
