package store

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"syscall"
	"testing"

	bolt "go.etcd.io/bbolt"
)

// The upgrade of a first-format store (v1store_test.go) is a series of
// transactions: the new buckets, the memory index rebuilt from the entries
// in chunks, and, at the first listing by tool or run, the audit index
// built in chunks. The tests below kill a warden (SIGKILL, from inside,
// right after the transaction it is at commits) part way through and check
// what the next one finds.

const killAtEnv = "WARDEN_STORE_KILL_AT"

// upgradeHelper is the child of the upgrade tests: it upgrades the store
// at path in small chunks (4 of the memory index, 5 of the audit index)
// and kills itself after its killAtEnv-th upgrade transaction commits.
func upgradeHelper(path string) error {
	killAt, err := strconv.Atoi(os.Getenv(killAtEnv))
	if err != nil {
		return err
	}
	memRebuildChunk, auditIndexChunk = 16, 64
	steps := 0
	upgraded = func() {
		if steps++; steps == killAt {
			if p, err := os.FindProcess(os.Getpid()); err == nil {
				p.Kill() // SIGKILL where there are signals
			}
			select {}
		}
	}
	s, err := Open(path, &Options{Linger: -1})
	if err != nil {
		return err
	}
	if _, err := s.ListAudit(bg, AuditFilter{Tool: "shell"}); err != nil {
		return err
	}
	return s.Close()
}

// runUpgrade runs upgradeHelper on the store in dir, killed after its
// killAt-th upgrade transaction, and reports whether it was killed (false:
// it finished the upgrade first).
func runUpgrade(t *testing.T, dir string, killAt int) (killed bool) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestHelperProcess$", "-test.count=1")
	cmd.Env = append(os.Environ(), helperEnv+"=upgrade", helperPathEnv+"="+dir+"/warden.db", killAtEnv+"="+strconv.Itoa(killAt))
	out, err := cmd.CombinedOutput()
	var ee *exec.ExitError
	switch {
	case err == nil:
		return false
	case errors.As(err, &ee) && ee.Sys().(syscall.WaitStatus).Signal() == syscall.SIGKILL:
		return true
	}
	t.Fatalf("the upgrading warden failed: %v\n%s", err, out)
	return false
}

// checkV1 checks that the store in dir holds everything the first-format
// store held, and answers what the warden that made it answered.
func checkV1(t *testing.T, dir string) {
	t.Helper()
	golden := readGolden(t)
	s := openTest(t, dir)
	if rep, err := s.VerifyAudit(bg); err != nil || rep.Records != 300 {
		t.Fatalf("VerifyAudit = %+v, %v", rep, err)
	}
	for _, f := range []AuditFilter{{Tool: "shell"}, {RunID: "run-3"}, {RunID: "run-3", Tool: "fs_read", AfterSeq: 100, Limit: 5}} {
		var want []uint64
		if err := json.Unmarshal(golden[fmt.Sprintf("audit run=%s tool=%s after=%d limit=%d", f.RunID, f.Tool, f.AfterSeq, f.Limit)], &want); err != nil {
			t.Fatal(err)
		}
		if recs, err := s.ListAudit(bg, f); err != nil || !slices.Equal(seqs(recs), want) {
			t.Errorf("ListAudit(%+v) = %v, %v; want %v", f, seqs(recs), err, want)
		}
	}
	if all, err := s.ListMemory(bg, "", 0); err != nil || len(all) != 60 {
		t.Errorf("ListMemory: %d entries, %v; want 60", len(all), err)
	}
	checkIndex(t, s)
	for name, q := range map[string]MemoryQuery{
		"search deploy":                    {Text: "deploy", Limit: 7},
		"search zeppelin walrus garden":    {Text: "zeppelin walrus garden", Limit: 7},
		"search deploy garden without ns1": {Text: "deploy garden", Namespace: func(ns string) bool { return ns != "ns1" }},
	} {
		var want []MemoryHit
		if err := json.Unmarshal(golden[name], &want); err != nil {
			t.Fatal(err)
		}
		got, err := s.SearchMemory(bg, q)
		if err != nil || len(got) != len(want) {
			t.Fatalf("%s: %d hits, %v; want %d", name, len(got), err, len(want))
		}
		for i := range got {
			if got[i].Key != want[i].Key || got[i].Score != want[i].Score {
				t.Errorf("%s hit %d: %s %v, want %s %v", name, i, got[i].Key, got[i].Score, want[i].Key, want[i].Score)
			}
		}
	}
	if runs, err := s.ListRuns(bg, 0); err != nil || len(runs) != 3 {
		t.Errorf("ListRuns: %d runs, %v; want 3", len(runs), err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestUpgradeKilled: a warden killed after any transaction of the
// upgrade leaves a store the next warden opens, finishes upgrading and
// reads without losing anything.
func TestUpgradeKilled(t *testing.T) {
	k := 1
	for ; ; k++ {
		dir := oldStore(t)
		if !runUpgrade(t, dir, k) {
			break
		}
		t.Run(fmt.Sprintf("killed after step %d", k), func(t *testing.T) { checkV1(t, dir) })
	}
	// The new buckets, the memory index's reset and 4 chunks, the audit
	// index's 5 chunks.
	if k-1 < 10 {
		t.Errorf("the upgrade took %d transactions; the test expects at least 10", k-1)
	}
}

// TestUpgradeKilledRepeatedly: wardens each killed after their second
// upgrade transaction (a caller's timeout shorter than the upgrade) still
// get the upgrade done between them: each carries on from where the last
// one was killed.
func TestUpgradeKilledRepeatedly(t *testing.T) {
	dir := oldStore(t)
	for n := 1; runUpgrade(t, dir, 2); n++ {
		if n == 20 {
			t.Fatalf("20 wardens were killed after their second upgrade transaction and the upgrade is not done: each one starts it over")
		}
	}
	checkV1(t, dir)
}

// TestUpgradeResumedAfterOlderWarden: a rebuild of the memory index cut
// short, then memory written by a warden without the index (which keeps
// only the entries and their statistics in order): the next warden does
// not carry on from an index that no longer matches the entries, it
// starts over.
func TestUpgradeResumedAfterOlderWarden(t *testing.T) {
	for name, older := range map[string]func(tx *bolt.Tx) error{
		// Each as that warden's DeleteMemory and PutMemory do it, for
		// an entry the first chunk indexed.
		"an entry deleted": func(tx *bolt.Tx) error {
			doc := memKey("ns0", "k00")
			tf, dl := termFreqs(string(tx.Bucket(bucketMemory).Get(doc)[16:]))
			for term := range tf {
				if err := tx.Bucket(bucketMemIndex).Delete(append(append([]byte(term), 0), doc...)); err != nil {
					return err
				}
			}
			if err := addStats(tx.Bucket(bucketMemStats), "ns0", -1, -int64(dl)); err != nil {
				return err
			}
			return tx.Bucket(bucketMemory).Delete(doc)
		},
		"an entry replaced by one without terms": func(tx *bolt.Tx) error {
			doc := memKey("ns0", "k00")
			_, dl := termFreqs(string(tx.Bucket(bucketMemory).Get(doc)[16:]))
			if err := addStats(tx.Bucket(bucketMemStats), "ns0", 0, -int64(dl)); err != nil {
				return err
			}
			return tx.Bucket(bucketMemory).Put(doc, encodeEntry(v1Base, v1Base, "the and a"))
		},
		// Not a warden's doing: the postings built so far lost (the
		// next open makes the bucket again, empty).
		"the postings removed": func(tx *bolt.Tx) error { return tx.DeleteBucket(bucketMemPostings) },
	} {
		t.Run(name, func(t *testing.T) {
			dir := oldStore(t)
			if !runUpgrade(t, dir, 3) { // the new buckets, the reset, the first chunk
				t.Fatal("the upgrade finished in 3 transactions")
			}
			editDB(t, dir, older)
			s := openTest(t, dir)
			checkIndex(t, s)
		})
	}
}

// TestMemoryIndexBucketRemoved: a complete memory index whose postings or
// term statistics are removed is rebuilt at the next open, not taken for
// an index of nothing.
func TestMemoryIndexBucketRemoved(t *testing.T) {
	for _, bucket := range [][]byte{bucketMemPostings, bucketMemTerms} {
		t.Run(string(bucket), func(t *testing.T) {
			dir := oldStore(t)
			checkV1(t, dir) // upgraded: the index complete
			editDB(t, dir, func(tx *bolt.Tx) error { return tx.DeleteBucket(bucket) })
			checkV1(t, dir)
		})
	}
}
