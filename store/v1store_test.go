package store

import (
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"
)

// The store of the first format, as the warden of commit f1d50f0 left it:
// before the audit index, the memory index in blocks and runs kept in
// parts. v1Store writes it with bbolt directly, key by key in that
// warden's layout, with what that warden's store wrote for this sequence
// of calls (each AppendAudit and PutMemory reading the clock once):
//
//   - 300 audit records, record i an intent of run-(i%7) by one of four
//     tools, every 50th a note without either field;
//   - 60 memory entries in three namespaces, indexed one posting per term
//     and entry (memory_index: term\x00ns\x00key -> uvarint tf, uvarint
//     length) with per-namespace statistics (memory_stats: uvarint count,
//     uvarint total length);
//   - 3 agent runs, each one whole JSON document.
//
// testdata/v1/audit.head is the anchor that warden wrote for that log,
// and testdata/v1/golden.json what it answered (listings and searches):
// v1Store checks that the log it writes ends at that anchor, so the
// records are that warden's to the byte.

// v1Base is the clock of the first call; each call reads it 1ms later.
var v1Base = time.Date(2024, 5, 1, 12, 0, 0, 0, time.UTC)

// v1Buckets are the first format's buckets.
var v1Buckets = []string{"meta", "audit", "memory", "memory_index", "memory_stats", "runs", "artifacts", "pins", "grants", "trust", "jobs"}

// oldStore writes the first-format store, with its anchor, into a new
// directory and returns it.
func oldStore(t testing.TB) string {
	t.Helper()
	dir := t.TempDir()
	db, err := bolt.Open(filepath.Join(dir, "warden.db"), 0o600, &bolt.Options{Timeout: time.Second, NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	var head anchor
	err = db.Update(func(tx *bolt.Tx) error {
		for _, name := range v1Buckets {
			if _, err := tx.CreateBucket([]byte(name)); err != nil {
				return err
			}
		}
		if err := tx.Bucket([]byte("meta")).Put([]byte("format"), []byte("warden.store/v1")); err != nil {
			return err
		}
		var err error
		if head, err = v1Audit(tx.Bucket([]byte("audit"))); err != nil {
			return err
		}
		if err := v1Memory(tx); err != nil {
			return err
		}
		return v1Runs(tx.Bucket([]byte("runs")))
	})
	if cerr := db.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		t.Fatal(err)
	}
	want, err := os.ReadFile(filepath.Join("testdata", "v1", "audit.head"))
	if err != nil {
		t.Fatal(err)
	}
	if got := encodeAnchor(head); strings.TrimSpace(string(got)) != strings.TrimSpace(string(want)) {
		t.Fatalf("the first-format log written here ends at %s; the warden of that format ended it at %s", got, want)
	}
	if err := os.WriteFile(filepath.Join(dir, "audit.head"), want, 0o600); err != nil {
		t.Fatal(err)
	}
	return dir
}

// v1Clock is the time of call n (from 1).
func v1Clock(n int) time.Time { return v1Base.Add(time.Duration(n) * time.Millisecond) }

func v1Audit(b *bolt.Bucket) (anchor, error) {
	tools := []string{"fs_read", "fs_write", "shell", "http_get"}
	head := genesis
	for i := 1; i <= 300; i++ {
		ev := fmt.Sprintf(`{"phase":"intent","run_id":"run-%d","tool":%q,"i":%d}`, i%7, tools[i%len(tools)], i)
		if i%50 == 0 {
			ev = fmt.Sprintf(`{"phase":"note","i":%d}`, i)
		}
		head.seq++
		v, hash := encodeRecord(head.seq, v1Clock(i).Format(time.RFC3339Nano), head.hash, []byte(ev))
		if err := b.Put(seqKey(head.seq), v); err != nil {
			return head, err
		}
		head.hash = hash
	}
	return head, nil
}

func v1Memory(tx *bolt.Tx) error {
	entries, index, stats := tx.Bucket([]byte("memory")), tx.Bucket([]byte("memory_index")), tx.Bucket([]byte("memory_stats"))
	words := []string{"deploy", "pipeline", "kumquat", "heron", "release", "service", "tests", "walrus", "zeppelin", "garden"}
	for i := 0; i < 60; i++ {
		v := ""
		for j := 0; j < 5+i%7; j++ {
			v += words[(i*3+j*j)%len(words)] + " "
		}
		ns := fmt.Sprintf("ns%d", i%3)
		doc := memKey(ns, fmt.Sprintf("k%02d", i))
		tf, dl := termFreqs(v)
		for term, n := range tf {
			k := append(append([]byte(term), 0), doc...)
			if err := index.Put(k, binary.AppendUvarint(binary.AppendUvarint(nil, uint64(n)), uint64(dl))); err != nil {
				return err
			}
		}
		if err := addStats(stats, ns, 1, int64(dl)); err != nil {
			return err
		}
		now := v1Clock(301 + i)
		if err := entries.Put(doc, encodeEntry(now, now, v)); err != nil {
			return err
		}
	}
	return nil
}

func v1Runs(b *bolt.Bucket) error {
	for i := 1; i <= 3; i++ {
		doc := fmt.Sprintf(`{"id":"run-%d","kind":"agent","status":"succeeded","steps":2,"transcript":[{"role":"user","content":"hi %d"}],"responses":[],"tool_calls":[]}`, i, i)
		if err := b.Put([]byte(fmt.Sprintf("run-%d", i)), []byte(doc)); err != nil {
			return err
		}
	}
	return nil
}
