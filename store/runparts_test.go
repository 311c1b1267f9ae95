package store

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	bolt "go.etcd.io/bbolt"

	"github.com/wardenrt/warden/internal/runpatch"
)

// TestRunsOldStore: runs an older warden wrote whole read back as they
// were, and take patches (sending everything first) from then on.
func TestRunsOldStore(t *testing.T) {
	s := openTest(t, oldStore(t))
	doc, err := s.Run(bg, "run-2")
	if err != nil || string(doc) != `{"id":"run-2","kind":"agent","status":"succeeded","steps":2,"transcript":[{"role":"user","content":"hi 2"}],"responses":[],"tool_calls":[]}` {
		t.Fatalf("Run = %s, %v", doc, err)
	}
	head := json.RawMessage(`{"id":"run-2","status":"running","transcript":null}`)
	err = s.PatchRun(bg, "run-2", runpatch.Patch{Head: head, Lists: []runpatch.List{{Field: "transcript", Len: 2, Set: map[int]json.RawMessage{1: json.RawMessage(`"b"`)}}}})
	if !errors.Is(err, ErrConflict) {
		t.Fatalf("a patch assuming parts of a whole run: %v", err)
	}
	err = s.PatchRun(bg, "run-2", runpatch.Patch{Head: head, Lists: []runpatch.List{{Field: "transcript", Len: 2, Set: map[int]json.RawMessage{0: json.RawMessage(`"a"`), 1: json.RawMessage(`"b"`)}}}})
	if err != nil {
		t.Fatal(err)
	}
	runs, err := s.ListRuns(bg, 0)
	if err != nil || len(runs) != 3 || string(runs[1]) != `{"id":"run-2","status":"running","transcript":["a","b"]}` || !strings.Contains(string(runs[0]), `"run-3"`) {
		t.Fatalf("ListRuns = %s, %v", runs, err)
	}
}

// TestRunPartsDamaged: parts that do not add up are reported, not
// assembled into a wrong document.
func TestRunPartsDamaged(t *testing.T) {
	dir := t.TempDir()
	s := openTest(t, dir)
	head := json.RawMessage(`{"id":"r","transcript":null}`)
	err := s.PatchRun(bg, "r", runpatch.Patch{Head: head, Lists: []runpatch.List{{Field: "transcript", Len: 3, Set: map[int]json.RawMessage{0: json.RawMessage(`0`), 1: json.RawMessage(`1`), 2: json.RawMessage(`2`)}}}})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	for name, edit := range map[string]func(parts *bolt.Bucket) error{
		"an element removed": func(parts *bolt.Bucket) error { return parts.Delete(itemKey("r", 0, 1)) },
		"an element added":   func(parts *bolt.Bucket) error { return parts.Put(itemKey("r", 0, 3), []byte(`3`)) },
		"a list added":       func(parts *bolt.Bucket) error { return parts.Put(itemKey("r", 1, 0), []byte(`3`)) },
		"lengths garbled":    func(parts *bolt.Bucket) error { return parts.Put([]byte("r"), []byte{1, 200}) },
	} {
		t.Run(name, func(t *testing.T) {
			d := copyDir(t, dir)
			editDB(t, d, func(tx *bolt.Tx) error { return edit(tx.Bucket(bucketRunParts)) })
			s := openTest(t, d)
			if doc, err := s.Run(bg, "r"); !errors.Is(err, ErrCorrupt) {
				t.Errorf("Run = %s, %v; want ErrCorrupt", doc, err)
			}
		})
	}
}
