// Package storetest is the conformance suite for warden's store contract,
// and a helper that opens a real store for tests of other packages.
package storetest

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/wardenrt/warden/internal/runpatch"
	"github.com/wardenrt/warden/store"
	bolt "go.etcd.io/bbolt"
)

// Backend is the store contract every backend implements.
type Backend = store.Backend

var _ Backend = (*store.Store)(nil)

// Open opens a new store in t.TempDir(). On cleanup it closes the store (if
// the test did not), reopens the file, verifies the audit chain and checks
// the consistency of the bbolt file.
func Open(t testing.TB, opts *store.Options) *store.Store {
	t.Helper()
	path := filepath.Join(t.TempDir(), "warden.db")
	s, err := store.Open(path, opts)
	if err != nil {
		t.Fatalf("store.Open: %v", err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Errorf("closing %s: %v", path, err)
		}
		var reopen store.Options
		if opts != nil {
			reopen.AnchorPath = opts.AnchorPath
		}
		reopen.Linger = -1
		s, err := store.Open(path, &reopen)
		if err != nil {
			t.Errorf("reopening %s: %v", path, err)
			return
		}
		if rep, err := s.VerifyAudit(context.Background()); err != nil {
			t.Errorf("audit log of %s does not verify on cleanup: %v (%+v)", path, err, rep)
		}
		if err := s.Close(); err != nil {
			t.Errorf("closing %s: %v", path, err)
		}
		checkFile(t, path)
	})
	return s
}

// checkFile runs bbolt's consistency check on a closed store file.
func checkFile(t testing.TB, path string) {
	db, err := bolt.Open(path, 0o600, &bolt.Options{ReadOnly: true, Timeout: 5 * time.Second})
	if err != nil {
		t.Errorf("reopening %s for a consistency check: %v", path, err)
		return
	}
	defer db.Close()
	err = db.View(func(tx *bolt.Tx) error {
		for err := range tx.Check() {
			t.Errorf("bbolt consistency check of %s: %v", path, err)
		}
		return nil
	})
	if err != nil {
		t.Errorf("consistency check of %s: %v", path, err)
	}
}

// Run runs the conformance suite. open must return a new, empty backend for
// each call; Run closes it.
func Run(t *testing.T, open func(t *testing.T) Backend) {
	tests := []struct {
		name string
		fn   func(t *testing.T, b Backend)
	}{
		{"AuditAppendIsGaplessAndChained", testAuditChain},
		{"AuditRejectsNonObjects", testAuditRejects},
		{"AuditFilters", testAuditFilters},
		{"AuditFiltersReadEventsAsJSON", testAuditOddEvents},
		{"AuditNotFound", testAuditNotFound},
		{"AuditExport", testAuditExport},
		{"AuditConcurrentAppends", testAuditConcurrent},
		{"AuditCanceledContext", testAuditCanceled},
		{"MemoryCRUD", testMemoryCRUD},
		{"MemoryRejectsBadNames", testMemoryNames},
		{"MemorySearchRanking", testMemoryRanking},
		{"MemorySearchFollowsUpdates", testMemoryUpdates},
		{"MemorySearchNamespacesAndLimit", testMemoryNamespaces},
		{"Runs", testRuns},
		{"UpdateRunIsOneTransaction", testUpdateRun},
		{"RunsInParts", testRunParts},
		{"Artifacts", testArtifacts},
		{"Pins", testPins},
		{"GrantsAndTrust", testGrantsAndTrust},
		{"Jobs", testJobs},
		{"ReturnedBytesAreCopies", testCopies},
		{"ValuesKeepTheirBytes", testValueBytes},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			b := open(t)
			defer func() {
				if err := b.Close(); err != nil {
					t.Errorf("Close: %v", err)
				}
			}()
			tc.fn(t, b)
		})
	}
}

var ctx = context.Background()

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func appendEvent(t *testing.T, b Backend, event string) uint64 {
	t.Helper()
	seq, err := b.AppendAudit(ctx, json.RawMessage(event))
	if err != nil {
		t.Fatalf("AppendAudit(%s): %v", event, err)
	}
	return seq
}

// wantHash is the record hash as the contract defines it.
func wantHash(r store.AuditRecord) string {
	sum := sha256.Sum256(fmt.Appendf(nil, "%s\n%d\n%s\n%s", r.Prev, r.Seq, r.Time.UTC().Format(time.RFC3339Nano), r.Event))
	return hex.EncodeToString(sum[:])
}

func testAuditChain(t *testing.T, b Backend) {
	rep, err := b.VerifyAudit(ctx)
	if err != nil || rep.Records != 0 || rep.HeadSeq != 0 || rep.FirstBad != 0 {
		t.Fatalf("empty log: VerifyAudit = %+v, %v; want 0 records, no error", rep, err)
	}
	var events []string
	for i := 1; i <= 25; i++ {
		ev := fmt.Sprintf(`{"n":%d,"tool":"fs.read","text":"a <b> & \"c\" é"}`, i)
		events = append(events, ev)
		if seq := appendEvent(t, b, ev); seq != uint64(i) {
			t.Fatalf("append %d got seq %d", i, seq)
		}
	}
	recs, err := b.ListAudit(ctx, store.AuditFilter{})
	must(t, err)
	if len(recs) != len(events) {
		t.Fatalf("ListAudit returned %d records, want %d", len(recs), len(events))
	}
	prev := strings.Repeat("0", 64)
	for i, r := range recs {
		if r.Seq != uint64(i+1) {
			t.Errorf("record %d has seq %d", i+1, r.Seq)
		}
		if string(r.Event) != events[i] {
			t.Errorf("record %d event = %s, want %s", r.Seq, r.Event, events[i])
		}
		if r.Prev != prev {
			t.Errorf("record %d prev = %s, want the previous hash %s", r.Seq, r.Prev, prev)
		}
		if h := wantHash(r); r.Hash != h {
			t.Errorf("record %d hash = %s, want sha256(prev\\nseq\\ntime\\nevent) = %s", r.Seq, r.Hash, h)
		}
		if r.Time.IsZero() {
			t.Errorf("record %d has no time", r.Seq)
		}
		one, err := b.AuditRecord(ctx, r.Seq)
		must(t, err)
		if one.Hash != r.Hash || !one.Time.Equal(r.Time) || string(one.Event) != string(r.Event) {
			t.Errorf("AuditRecord(%d) = %+v, ListAudit has %+v", r.Seq, one, r)
		}
		prev = r.Hash
	}
	rep, err = b.VerifyAudit(ctx)
	if err != nil {
		t.Fatalf("VerifyAudit: %v (%+v)", err, rep)
	}
	if rep.Records != 25 || rep.HeadSeq != 25 || rep.HeadHash != prev || rep.FirstBad != 0 || rep.AnchorSeq != 25 {
		t.Errorf("VerifyAudit = %+v; want 25 records, head 25 %s, anchor 25", rep, prev)
	}
	// Whitespace is not kept.
	seq := appendEvent(t, b, "{ \"spaced\" : [ 1 , 2 ] }\n")
	r, err := b.AuditRecord(ctx, seq)
	must(t, err)
	if string(r.Event) != `{"spaced":[1,2]}` {
		t.Errorf("event stored as %s, want it compacted", r.Event)
	}
}

func testAuditRejects(t *testing.T, b Backend) {
	for _, ev := range []string{``, `[1,2]`, `"text"`, `42`, `null`, `{"a":`, `{"a":1} {"b":2}`, `{"a":1}x`} {
		if seq, err := b.AppendAudit(ctx, json.RawMessage(ev)); err == nil {
			t.Errorf("AppendAudit(%q) = %d, nil; want an error", ev, seq)
		}
	}
	if seq := appendEvent(t, b, `{}`); seq != 1 {
		t.Errorf("first accepted event got seq %d, want 1 (rejected events must not use numbers)", seq)
	}
}

func testAuditFilters(t *testing.T, b Backend) {
	events := []string{
		`{"run_id":"r1","tool":"fs.read"}`,
		`{"run_id":"r2","tool":"fs.read"}`,
		`{"run_id":"r1","tool":"shell.exec"}`,
		`{"tool":"fs.read","args":{"run_id":"r1"}}`,
		`{"run_id":"r1","tool":"fs.read","phase":"result"}`,
		`{"RUN_ID":"r1","Tool":"fs.read"}`,
		`{"run_id":1,"tool":["fs.read"]}`,
	}
	for _, ev := range events {
		appendEvent(t, b, ev)
	}
	tests := []struct {
		f    store.AuditFilter
		want []uint64
	}{
		{store.AuditFilter{}, []uint64{1, 2, 3, 4, 5, 6, 7}},
		{store.AuditFilter{RunID: "r1"}, []uint64{1, 3, 5}},
		{store.AuditFilter{Tool: "fs.read"}, []uint64{1, 2, 4, 5}},
		{store.AuditFilter{RunID: "r1", Tool: "fs.read"}, []uint64{1, 5}},
		{store.AuditFilter{RunID: "r3"}, nil},
		{store.AuditFilter{AfterSeq: 3}, []uint64{4, 5, 6, 7}},
		{store.AuditFilter{AfterSeq: 7}, nil},
		{store.AuditFilter{AfterSeq: 1<<64 - 1}, nil},
		{store.AuditFilter{Limit: 2}, []uint64{1, 2}},
		{store.AuditFilter{Tool: "fs.read", AfterSeq: 1, Limit: 2}, []uint64{2, 4}},
		{store.AuditFilter{Limit: 2, Newest: true}, []uint64{6, 7}},
		{store.AuditFilter{Tool: "fs.read", Limit: 3, Newest: true}, []uint64{2, 4, 5}},
		{store.AuditFilter{RunID: "r1", AfterSeq: 2, Limit: 5, Newest: true}, []uint64{3, 5}},
		{store.AuditFilter{Tool: "fs.read", Newest: true}, []uint64{1, 2, 4, 5}},
		{store.AuditFilter{RunID: "r1", Tool: "shell.exec", Limit: 1, Newest: true}, []uint64{3}},
	}
	for _, tc := range tests {
		recs, err := b.ListAudit(ctx, tc.f)
		must(t, err)
		var got []uint64
		for _, r := range recs {
			got = append(got, r.Seq)
		}
		if !slices.Equal(got, tc.want) {
			t.Errorf("ListAudit(%+v) = %v, want %v", tc.f, got, tc.want)
		}
	}
}

// testAuditOddEvents: listings by run and tool read an event's fields as
// a JSON decoder does (escaped names and values, the last of duplicate
// members, only strings), whatever a backend's index makes of them, and
// agree with a scan over many records.
func testAuditOddEvents(t *testing.T, b Backend) {
	events := []string{
		`{"run\u005fid":"r1","tool":"fs_read"}`,
		`{"run_id":"r\u0031","tool":"fs\u005fread"}`,
		`{"run_id":"r2","run_id":"r1","tool":"shell","tool":"fs_read"}`,
		`{"run_id":"r1","run_id":"r2","tool":"fs_read","tool":"shell"}`,
		`{"run_id":1,"tool":["fs_read"]}`,
		`{"run_id":null,"tool":"fs_read"}`,
		`{"args":{"run_id":"r1","tool":"fs_read"},"tool":"shell"}`,
		`{"tool":"fs_read","x":"\u0000","run_id":"r1"}`,
		`{"tool":"fs_read","x":"\ud800","run_id":"r1"}`,
		`{"tool":"\ud800","run_id":"r1"}`,
		`{"tool":"nul\u0000","run_id":"r1"}`,
		`{"tool":"\u00e9t\u00e9","run_id":"r\ud83d\ude00"}`,
		`{"tool":"été","run_id":"r😀"}`,
		"{\"tool\":\"fs_read\",\"x\":\"\xff\",\"run_id\":\"r1\"}",
		`{"tool":"fs_read","n":1e400,"run_id":"r1"}`,
	}
	var all []uint64
	for i := range 3 {
		for _, ev := range events {
			all = append(all, appendEvent(t, b, ev))
		}
		for j := range 200 {
			all = append(all, appendEvent(t, b, fmt.Sprintf(`{"tool":"other","run_id":"r%d","i":%d}`, (i+j)%5, j)))
		}
	}
	recs, err := b.ListAudit(ctx, store.AuditFilter{})
	must(t, err)
	for _, run := range []string{"", "r1", "r2", "r😀", "r3"} {
		for _, tool := range []string{"", "fs_read", "shell", "été", "\uFFFD", "nul\x00", "other"} {
			if run == "" && tool == "" {
				continue
			}
			var want []uint64
			for _, r := range recs {
				if store.EventMatches(r.Event, run, tool) {
					want = append(want, r.Seq)
				}
			}
			for _, f := range []store.AuditFilter{
				{RunID: run, Tool: tool},
				{RunID: run, Tool: tool, Limit: 4, Newest: true},
				{RunID: run, Tool: tool, Limit: 3, AfterSeq: 250},
			} {
				got, err := b.ListAudit(ctx, f)
				must(t, err)
				var seqs []uint64
				for _, r := range got {
					seqs = append(seqs, r.Seq)
				}
				w := want
				if f.AfterSeq > 0 {
					w = slices.DeleteFunc(slices.Clone(w), func(s uint64) bool { return s <= f.AfterSeq })
				}
				if f.Limit > 0 && len(w) > f.Limit {
					if f.Newest {
						w = w[len(w)-f.Limit:]
					} else {
						w = w[:f.Limit]
					}
				}
				if !slices.Equal(seqs, w) {
					t.Errorf("ListAudit(%+v) = %v, want %v", f, seqs, w)
				}
			}
		}
	}
	// What a decoder reads, spelled out for a few.
	for _, tc := range []struct {
		run, tool string
		want      []uint64 // within the first round of events
	}{
		{"r1", "fs_read", []uint64{1, 2, 3, 8, 9, 14, 15}},
		{"", "shell", []uint64{4, 7}},
		{"r2", "", []uint64{4}},
	} {
		got, err := b.ListAudit(ctx, store.AuditFilter{RunID: tc.run, Tool: tc.tool, Limit: len(tc.want)})
		must(t, err)
		var seqs []uint64
		for _, r := range got {
			seqs = append(seqs, r.Seq)
		}
		if !slices.Equal(seqs, tc.want) {
			t.Errorf("run %q tool %q: %v, want %v", tc.run, tc.tool, seqs, tc.want)
		}
	}
}

func testAuditNotFound(t *testing.T, b Backend) {
	appendEvent(t, b, `{"a":1}`)
	for _, seq := range []uint64{0, 2, 1 << 63} {
		if _, err := b.AuditRecord(ctx, seq); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("AuditRecord(%d) error = %v, want ErrNotFound", seq, err)
		}
	}
}

func testAuditExport(t *testing.T, b Backend) {
	var buf bytes.Buffer
	must(t, b.ExportAudit(ctx, &buf))
	if buf.Len() != 0 {
		t.Errorf("export of an empty log = %q", buf.String())
	}
	for i := 0; i < 10; i++ {
		appendEvent(t, b, fmt.Sprintf(`{"i":%d,"s":"line\nbreak"}`, i))
	}
	recs, err := b.ListAudit(ctx, store.AuditFilter{})
	must(t, err)
	must(t, b.ExportAudit(ctx, &buf))
	sc := bufio.NewScanner(&buf)
	n := 0
	for sc.Scan() {
		var r store.AuditRecord
		dec := json.NewDecoder(bytes.NewReader(sc.Bytes()))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&r); err != nil {
			t.Fatalf("export line %d %q: %v", n+1, sc.Text(), err)
		}
		if n >= len(recs) {
			t.Fatalf("export has more lines than the log has records")
		}
		want := recs[n]
		if r.Seq != want.Seq || r.Hash != want.Hash || r.Prev != want.Prev || !r.Time.Equal(want.Time) || string(r.Event) != string(want.Event) {
			t.Errorf("export line %d = %+v, want %+v", n+1, r, want)
		}
		n++
	}
	if n != len(recs) {
		t.Errorf("export has %d lines, want %d", n, len(recs))
	}
}

func testAuditConcurrent(t *testing.T, b Backend) {
	const writers, each = 16, 40
	seqs := make([][]uint64, writers)
	var wg sync.WaitGroup
	for w := range writers {
		wg.Go(func() {
			for i := range each {
				seq, err := b.AppendAudit(ctx, json.RawMessage(fmt.Sprintf(`{"w":%d,"i":%d}`, w, i)))
				if err != nil {
					t.Errorf("writer %d: %v", w, err)
					return
				}
				seqs[w] = append(seqs[w], seq)
			}
		})
	}
	wg.Wait()
	seen := make(map[uint64]string)
	for w, ss := range seqs {
		for i, seq := range ss {
			if i > 0 && seq <= ss[i-1] {
				t.Errorf("writer %d got seq %d after %d", w, seq, ss[i-1])
			}
			ev := fmt.Sprintf(`{"w":%d,"i":%d}`, w, i)
			if other, dup := seen[seq]; dup {
				t.Errorf("seq %d given to %s and %s", seq, other, ev)
			}
			seen[seq] = ev
		}
	}
	for seq := uint64(1); seq <= writers*each; seq++ {
		r, err := b.AuditRecord(ctx, seq)
		if err != nil {
			t.Errorf("record %d: %v", seq, err)
			continue
		}
		if string(r.Event) != seen[seq] {
			t.Errorf("record %d = %s, want %s", seq, r.Event, seen[seq])
		}
	}
	rep, err := b.VerifyAudit(ctx)
	if err != nil || rep.HeadSeq != writers*each || rep.Records != writers*each {
		t.Errorf("VerifyAudit = %+v, %v; want %d records", rep, err, writers*each)
	}
}

func testAuditCanceled(t *testing.T, b Backend) {
	c, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := b.AppendAudit(c, json.RawMessage(`{"a":1}`)); !errors.Is(err, context.Canceled) {
		t.Errorf("AppendAudit with a canceled context: %v, want context.Canceled", err)
	}
	if seq := appendEvent(t, b, `{"a":2}`); seq != 1 {
		t.Errorf("seq after a canceled append = %d, want 1", seq)
	}
}

func testMemoryCRUD(t *testing.T, b Backend) {
	if _, err := b.GetMemory(ctx, "notes", "k"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("GetMemory of a missing entry: %v, want ErrNotFound", err)
	}
	must(t, b.PutMemory(ctx, "notes", "b", "second note"))
	must(t, b.PutMemory(ctx, "notes", "a", "first note"))
	must(t, b.PutMemory(ctx, "other", "a", "elsewhere"))
	e, err := b.GetMemory(ctx, "notes", "a")
	must(t, err)
	if e.Namespace != "notes" || e.Key != "a" || e.Value != "first note" || e.Created.IsZero() || e.Updated.Before(e.Created) {
		t.Errorf("GetMemory = %+v", e)
	}
	must(t, b.PutMemory(ctx, "notes", "a", "first note, revised"))
	e2, err := b.GetMemory(ctx, "notes", "a")
	must(t, err)
	if e2.Value != "first note, revised" || !e2.Created.Equal(e.Created) || e2.Updated.Before(e.Updated) {
		t.Errorf("after update GetMemory = %+v; want the new value, the old Created %v", e2, e.Created)
	}
	keys := func(es []store.MemoryEntry) []string {
		var out []string
		for _, e := range es {
			out = append(out, e.Namespace+"/"+e.Key)
		}
		return out
	}
	list, err := b.ListMemory(ctx, "notes", 0)
	must(t, err)
	if got := keys(list); !slices.Equal(got, []string{"notes/a", "notes/b"}) {
		t.Errorf("ListMemory(notes) = %v", got)
	}
	list, err = b.ListMemory(ctx, "", 0)
	must(t, err)
	if got := keys(list); !slices.Equal(got, []string{"notes/a", "notes/b", "other/a"}) {
		t.Errorf("ListMemory(all) = %v", got)
	}
	list, err = b.ListMemory(ctx, "", 2)
	must(t, err)
	if got := keys(list); !slices.Equal(got, []string{"notes/a", "notes/b"}) {
		t.Errorf("ListMemory(all, 2) = %v", got)
	}
	list, err = b.ListMemory(ctx, "not", 0)
	must(t, err)
	if len(list) != 0 {
		t.Errorf("ListMemory(not) = %v; a namespace is not a prefix", keys(list))
	}
	must(t, b.DeleteMemory(ctx, "notes", "a"))
	if _, err := b.GetMemory(ctx, "notes", "a"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("GetMemory after delete: %v, want ErrNotFound", err)
	}
	if err := b.DeleteMemory(ctx, "notes", "a"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("second DeleteMemory: %v, want ErrNotFound", err)
	}
	if e, err := b.GetMemory(ctx, "other", "a"); err != nil || e.Value != "elsewhere" {
		t.Errorf("other/a = %+v, %v", e, err)
	}
}

func testMemoryNames(t *testing.T, b Backend) {
	bad := []string{"", strings.Repeat("x", 257), "a\x00b", "\xff\xfe"}
	for _, name := range bad {
		if err := b.PutMemory(ctx, name, "k", "v"); err == nil {
			t.Errorf("PutMemory(ns %q) succeeded", name)
		}
		if err := b.PutMemory(ctx, "ns", name, "v"); err == nil {
			t.Errorf("PutMemory(key %q) succeeded", name)
		}
		if _, err := b.GetMemory(ctx, "ns", name); err == nil || errors.Is(err, store.ErrNotFound) {
			t.Errorf("GetMemory(key %q) = %v, want a validation error", name, err)
		}
	}
	long := strings.Repeat("é", 128) // 256 bytes
	must(t, b.PutMemory(ctx, long, long, "v"))
	if e, err := b.GetMemory(ctx, long, long); err != nil || e.Value != "v" {
		t.Errorf("256-byte names: %+v, %v", e, err)
	}
}

func hitKeys(hits []store.MemoryHit) []string {
	var out []string
	for _, h := range hits {
		out = append(out, h.Namespace+"/"+h.Key)
	}
	return out
}

func testMemoryRanking(t *testing.T, b Backend) {
	common := "the deploy pipeline builds the service and runs the tests before release"
	for i := range 20 {
		must(t, b.PutMemory(ctx, "notes", fmt.Sprintf("common%02d", i), common))
	}
	must(t, b.PutMemory(ctx, "notes", "rare", "the zeppelin release builds slowly"))
	must(t, b.PutMemory(ctx, "notes", "unrelated", "grocery list: apples, pears"))

	hits, err := b.SearchMemory(ctx, store.MemoryQuery{Text: "Zeppelin release"})
	must(t, err)
	if len(hits) == 0 || hits[0].Key != "rare" {
		t.Fatalf("search for the rare term: %v; want notes/rare first", hitKeys(hits))
	}
	if len(hits) != 10 {
		t.Errorf("default limit: got %d hits, want 10", len(hits))
	}
	for i := 1; i < len(hits); i++ {
		if hits[i].Score > hits[i-1].Score {
			t.Errorf("hits not best first: %v then %v", hits[i-1].Score, hits[i].Score)
		}
		if hits[i].Score == hits[i-1].Score && hits[i].Key < hits[i-1].Key {
			t.Errorf("tie not ordered by key: %s then %s", hits[i-1].Key, hits[i].Key)
		}
	}
	if hits[0].Value != "the zeppelin release builds slowly" || hits[0].Score <= 0 {
		t.Errorf("top hit = %+v", hits[0])
	}
	for _, h := range hits {
		if h.Key == "unrelated" {
			t.Errorf("an entry without any query term was returned")
		}
	}
	// Shorter entries rank above longer ones with the same term frequency.
	must(t, b.PutMemory(ctx, "len", "short", "kumquat tree"))
	must(t, b.PutMemory(ctx, "len", "long", "kumquat tree grows in a large garden near the old house by the river"))
	hits, err = b.SearchMemory(ctx, store.MemoryQuery{Text: "kumquat", Limit: 5})
	must(t, err)
	if got := hitKeys(hits); !slices.Equal(got, []string{"len/short", "len/long"}) {
		t.Errorf("length normalisation: %v", got)
	}
	// More occurrences rank higher at equal length.
	must(t, b.PutMemory(ctx, "tf", "once", "walrus alpha beta gamma"))
	must(t, b.PutMemory(ctx, "tf", "twice", "walrus walrus beta gamma"))
	hits, err = b.SearchMemory(ctx, store.MemoryQuery{Text: "walrus"})
	must(t, err)
	if got := hitKeys(hits); !slices.Equal(got, []string{"tf/twice", "tf/once"}) {
		t.Errorf("term frequency: %v", got)
	}
	for _, q := range []string{"", "the and of", "!!! ..."} {
		hits, err := b.SearchMemory(ctx, store.MemoryQuery{Text: q})
		if err != nil || len(hits) != 0 {
			t.Errorf("SearchMemory(%q) = %v, %v; want no hits", q, hitKeys(hits), err)
		}
	}
}

func testMemoryUpdates(t *testing.T, b Backend) {
	must(t, b.PutMemory(ctx, "n", "k", "ostrich feathers"))
	must(t, b.PutMemory(ctx, "n", "other", "penguin"))
	must(t, b.PutMemory(ctx, "n", "k", "pelican beaks"))
	if hits, err := b.SearchMemory(ctx, store.MemoryQuery{Text: "ostrich"}); err != nil || len(hits) != 0 {
		t.Errorf("old term still found after update: %v, %v", hitKeys(hits), err)
	}
	if hits, err := b.SearchMemory(ctx, store.MemoryQuery{Text: "pelican"}); err != nil || !slices.Equal(hitKeys(hits), []string{"n/k"}) {
		t.Errorf("new term after update: %v, %v", hitKeys(hits), err)
	}
	must(t, b.DeleteMemory(ctx, "n", "k"))
	if hits, err := b.SearchMemory(ctx, store.MemoryQuery{Text: "pelican ostrich"}); err != nil || len(hits) != 0 {
		t.Errorf("deleted entry still found: %v, %v", hitKeys(hits), err)
	}
	if hits, err := b.SearchMemory(ctx, store.MemoryQuery{Text: "PENGUIN"}); err != nil || !slices.Equal(hitKeys(hits), []string{"n/other"}) {
		t.Errorf("case-insensitive search: %v, %v", hitKeys(hits), err)
	}
}

func testMemoryNamespaces(t *testing.T, b Backend) {
	for _, ns := range []string{"a", "b", "c"} {
		for i := range 3 {
			must(t, b.PutMemory(ctx, ns, strconv.Itoa(i), "identical heron text"))
		}
	}
	hits, err := b.SearchMemory(ctx, store.MemoryQuery{Text: "heron", Limit: 4})
	must(t, err)
	if got := hitKeys(hits); !slices.Equal(got, []string{"a/0", "a/1", "a/2", "b/0"}) {
		t.Errorf("ties by namespace and key: %v", got)
	}
	hits, err = b.SearchMemory(ctx, store.MemoryQuery{Text: "heron", Namespace: func(ns string) bool { return ns != "a" }})
	must(t, err)
	if got := hitKeys(hits); !slices.Equal(got, []string{"b/0", "b/1", "b/2", "c/0", "c/1", "c/2"}) {
		t.Errorf("namespace filter: %v", got)
	}
	hits, err = b.SearchMemory(ctx, store.MemoryQuery{Text: "heron", Namespace: func(string) bool { return false }})
	if err != nil || len(hits) != 0 {
		t.Errorf("filter rejecting everything: %v, %v", hitKeys(hits), err)
	}
}

func testRuns(t *testing.T, b Backend) {
	if _, err := b.Run(ctx, "run-1"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("Run of a missing run: %v, want ErrNotFound", err)
	}
	for _, id := range []string{"20240102-b", "20240101-a", "20240103-c"} {
		must(t, b.PutRun(ctx, id, json.RawMessage(fmt.Sprintf(`{"id":%q, "status":"running"}`, id))))
	}
	must(t, b.PutRun(ctx, "20240101-a", json.RawMessage(`{"id":"20240101-a","status":"done"}`)))
	doc, err := b.Run(ctx, "20240101-a")
	must(t, err)
	if string(doc) != `{"id":"20240101-a","status":"done"}` {
		t.Errorf("Run after upsert = %s", doc)
	}
	runs, err := b.ListRuns(ctx, 0)
	must(t, err)
	var ids []string
	for _, r := range runs {
		var v struct{ ID string }
		must(t, json.Unmarshal(r, &v))
		ids = append(ids, v.ID)
	}
	if !slices.Equal(ids, []string{"20240103-c", "20240102-b", "20240101-a"}) {
		t.Errorf("ListRuns = %v, want newest first", ids)
	}
	if runs, err := b.ListRuns(ctx, 1); err != nil || len(runs) != 1 {
		t.Errorf("ListRuns(1) = %d runs, %v", len(runs), err)
	}
	if err := b.PutRun(ctx, "bad", json.RawMessage(`{"unterminated":`)); err == nil {
		t.Errorf("PutRun accepted invalid JSON")
	}
	if err := b.PutRun(ctx, "", json.RawMessage(`{}`)); err == nil {
		t.Errorf("PutRun accepted an empty id")
	}
}

// testUpdateRun: UpdateRun replaces a run's document by what fn makes of
// the one stored, in one transaction: a write of the run that comes while
// fn holds it lands after the update, never under it (a run resumed while
// a dead process's run is marked interrupted stays resumed); fn's error
// changes nothing and is returned.
func testUpdateRun(t *testing.T, b Backend) {
	must(t, b.PutRun(ctx, "r1", json.RawMessage(`{"id":"r1","status":"running"}`)))
	wrote := make(chan error, 1)
	must(t, b.UpdateRun(ctx, "r1", func(doc json.RawMessage) (json.RawMessage, error) {
		if string(doc) != `{"id":"r1","status":"running"}` {
			t.Errorf("UpdateRun saw %s", doc)
		}
		go func() { wrote <- b.PutRun(ctx, "r1", json.RawMessage(`{"id":"r1","status":"running","resumed":1}`)) }()
		return json.RawMessage(`{"id":"r1","status":"interrupted"}`), nil
	}))
	must(t, <-wrote)
	if doc, err := b.Run(ctx, "r1"); err != nil || string(doc) != `{"id":"r1","status":"running","resumed":1}` {
		t.Errorf("the write that came during UpdateRun: %s, %v", doc, err)
	}
	boom := errors.New("boom")
	if err := b.UpdateRun(ctx, "r1", func(json.RawMessage) (json.RawMessage, error) { return json.RawMessage(`{}`), boom }); !errors.Is(err, boom) {
		t.Errorf("UpdateRun with an error: %v", err)
	}
	if err := b.UpdateRun(ctx, "r1", func(json.RawMessage) (json.RawMessage, error) { return json.RawMessage(`{"unterminated":`), nil }); err == nil {
		t.Errorf("UpdateRun accepted invalid JSON")
	}
	if doc, err := b.Run(ctx, "r1"); err != nil || string(doc) != `{"id":"r1","status":"running","resumed":1}` {
		t.Errorf("Run after failed updates: %s, %v", doc, err)
	}
	if err := b.UpdateRun(ctx, "none", func(d json.RawMessage) (json.RawMessage, error) { return d, nil }); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("UpdateRun of a missing run: %v", err)
	}
	if err := b.UpdateRun(ctx, "", func(d json.RawMessage) (json.RawMessage, error) { return d, nil }); err == nil {
		t.Errorf("UpdateRun accepted an empty id")
	}
}

// testRunParts: a run written in parts (PatchRun) reads back as the whole
// document; a patch costs what it sends, and one that assumes elements the
// store does not hold (the run was written whole since) changes nothing
// and says so (ErrConflict).
func testRunParts(t *testing.T, b Backend) {
	raw := func(s string) json.RawMessage { return json.RawMessage(s) }
	head := func(status string) json.RawMessage {
		return raw(`{"id":"r1","status":"` + status + `","transcript":null,"steps":2,"tool_calls":null,"final":""}`)
	}
	lists := func(tlen int, tset map[int]json.RawMessage, clen int, cset map[int]json.RawMessage) []runpatch.List {
		return []runpatch.List{{Field: "transcript", Len: tlen, Set: tset}, {Field: "tool_calls", Len: clen, Set: cset}}
	}
	want := func(doc string) {
		t.Helper()
		got, err := b.Run(ctx, "r1")
		if err != nil || string(got) != doc {
			t.Fatalf("Run = %s, %v\nwant %s", got, err, doc)
		}
		runs, err := b.ListRuns(ctx, 0)
		if err != nil || len(runs) != 1 || string(runs[0]) != doc {
			t.Fatalf("ListRuns = %s, %v", runs, err)
		}
	}
	must(t, b.PatchRun(ctx, "r1", runpatch.Patch{Head: head("running"), Lists: lists(2, map[int]json.RawMessage{0: raw(`{"role":"system"}`), 1: raw(`{ "role" : "user" }`)}, 0, nil)}))
	want(`{"id":"r1","status":"running","transcript":[{"role":"system"},{"role":"user"}],"steps":2,"tool_calls":[],"final":""}`)
	// New elements only, and element 0 changed.
	must(t, b.PatchRun(ctx, "r1", runpatch.Patch{Head: head("running"), Lists: lists(3, map[int]json.RawMessage{0: raw(`{"role":"system","v":2}`), 2: raw(`"x"`)}, 1, map[int]json.RawMessage{0: raw(`{"tool":"fs_read"}`)})}))
	want(`{"id":"r1","status":"running","transcript":[{"role":"system","v":2},{"role":"user"},"x"],"steps":2,"tool_calls":[{"tool":"fs_read"}],"final":""}`)
	// An element neither held nor sent: nothing changes.
	err := b.PatchRun(ctx, "r1", runpatch.Patch{Head: head("succeeded"), Lists: lists(5, map[int]json.RawMessage{4: raw(`4`)}, 1, nil)})
	if !errors.Is(err, runpatch.ErrConflict) {
		t.Errorf("a patch with a gap: %v, want ErrConflict", err)
	}
	want(`{"id":"r1","status":"running","transcript":[{"role":"system","v":2},{"role":"user"},"x"],"steps":2,"tool_calls":[{"tool":"fs_read"}],"final":""}`)
	// Shorter lists drop their tails.
	must(t, b.PatchRun(ctx, "r1", runpatch.Patch{Head: head("running"), Lists: lists(1, nil, 0, nil)}))
	want(`{"id":"r1","status":"running","transcript":[{"role":"system","v":2}],"steps":2,"tool_calls":[],"final":""}`)
	must(t, b.PatchRun(ctx, "r1", runpatch.Patch{Head: head("running"), Lists: lists(2, map[int]json.RawMessage{1: raw(`"y"`)}, 0, nil)}))
	want(`{"id":"r1","status":"running","transcript":[{"role":"system","v":2},"y"],"steps":2,"tool_calls":[],"final":""}`)

	// Written whole (another writer, or UpdateRun): a patch that assumes
	// the old parts is refused; one that sends everything is not.
	must(t, b.UpdateRun(ctx, "r1", func(doc json.RawMessage) (json.RawMessage, error) {
		if string(doc) != `{"id":"r1","status":"running","transcript":[{"role":"system","v":2},"y"],"steps":2,"tool_calls":[],"final":""}` {
			t.Errorf("UpdateRun saw %s", doc)
		}
		return raw(`{"id":"r1","status":"interrupted"}`), nil
	}))
	want(`{"id":"r1","status":"interrupted"}`)
	if err := b.PatchRun(ctx, "r1", runpatch.Patch{Head: head("running"), Lists: lists(3, map[int]json.RawMessage{2: raw(`"z"`)}, 0, nil)}); !errors.Is(err, runpatch.ErrConflict) {
		t.Errorf("a patch after UpdateRun: %v, want ErrConflict", err)
	}
	want(`{"id":"r1","status":"interrupted"}`)
	must(t, b.PatchRun(ctx, "r1", runpatch.Patch{Head: head("done"), Lists: lists(1, map[int]json.RawMessage{0: raw(`0`)}, 1, map[int]json.RawMessage{0: raw(`1`)})}))
	want(`{"id":"r1","status":"done","transcript":[0],"steps":2,"tool_calls":[1],"final":""}`)
	must(t, b.PutRun(ctx, "r1", raw(`{"id":"r1","whole":true}`)))
	want(`{"id":"r1","whole":true}`)
	if err := b.PatchRun(ctx, "r1", runpatch.Patch{Head: head("running"), Lists: lists(1, nil, 0, nil)}); !errors.Is(err, runpatch.ErrConflict) {
		t.Errorf("a patch after PutRun: %v, want ErrConflict", err)
	}
	// Other lists, in another order, named with an escape: the old parts go.
	must(t, b.PatchRun(ctx, "r1", runpatch.Patch{Head: raw(`{"b":null,"id":"r1","tr\u0061nscript":null}`), Lists: []runpatch.List{
		{Field: "transcript", Len: 1, Set: map[int]json.RawMessage{0: raw(`"t"`)}}, {Field: "b", Len: 2, Set: map[int]json.RawMessage{0: raw(`true`), 1: raw(`null`)}}}}))
	want(`{"b":[true,null],"id":"r1","tr\u0061nscript":["t"]}`)

	for name, p := range map[string]runpatch.Patch{
		"head not an object":        {Head: raw(`[1]`)},
		"head not JSON":             {Head: raw(`{"a":`)},
		"list missing from head":    {Head: raw(`{"a":1}`), Lists: []runpatch.List{{Field: "b"}}},
		"list not null in head":     {Head: raw(`{"a":[]}`), Lists: []runpatch.List{{Field: "a"}}},
		"list twice in head":        {Head: raw(`{"a":null,"a":null}`), Lists: []runpatch.List{{Field: "a"}}},
		"list named twice":          {Head: raw(`{"a":null}`), Lists: []runpatch.List{{Field: "a"}, {Field: "a"}}},
		"element past the length":   {Head: raw(`{"a":null}`), Lists: []runpatch.List{{Field: "a", Len: 1, Set: map[int]json.RawMessage{1: raw(`1`)}}}},
		"element not JSON":          {Head: raw(`{"a":null}`), Lists: []runpatch.List{{Field: "a", Len: 1, Set: map[int]json.RawMessage{0: raw(`{`)}}}},
		"negative length":           {Head: raw(`{"a":null}`), Lists: []runpatch.List{{Field: "a", Len: -1}}},
		"nested list is not a list": {Head: raw(`{"x":{"a":null}}`), Lists: []runpatch.List{{Field: "a"}}},
	} {
		if err := b.PatchRun(ctx, "r2", p); !errors.Is(err, store.ErrInvalid) {
			t.Errorf("%s: PatchRun = %v, want ErrInvalid", name, err)
		}
	}
	if _, err := b.Run(ctx, "r2"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("a refused patch made a run: %v", err)
	}
	if err := b.PatchRun(ctx, "", runpatch.Patch{Head: raw(`{}`)}); !errors.Is(err, store.ErrInvalid) {
		t.Errorf("PatchRun accepted an empty id: %v", err)
	}
}

func testArtifacts(t *testing.T, b Backend) {
	data := []byte("artifact bytes\x00\xff")
	sum := sha256.Sum256(data)
	want := "sha256:" + hex.EncodeToString(sum[:])
	d1, err := b.PutArtifact(ctx, data)
	must(t, err)
	d2, err := b.PutArtifact(ctx, bytes.Clone(data))
	must(t, err)
	if d1 != want || d2 != want {
		t.Errorf("digests %s, %s; want %s", d1, d2, want)
	}
	got, err := b.Artifact(ctx, d1)
	must(t, err)
	if !bytes.Equal(got, data) {
		t.Errorf("Artifact = %q", got)
	}
	empty, err := b.PutArtifact(ctx, nil)
	must(t, err)
	if got, err := b.Artifact(ctx, empty); err != nil || len(got) != 0 {
		t.Errorf("empty artifact: %q, %v", got, err)
	}
	missing := "sha256:" + strings.Repeat("ab", 32)
	if _, err := b.Artifact(ctx, missing); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("missing artifact: %v, want ErrNotFound", err)
	}
	for _, bad := range []string{"", "sha256:", "md5:" + strings.Repeat("a", 32), "sha256:" + strings.Repeat("A", 64), "sha256:" + strings.Repeat("a", 63)} {
		if _, err := b.Artifact(ctx, bad); err == nil || errors.Is(err, store.ErrNotFound) {
			t.Errorf("Artifact(%q) = %v, want a validation error", bad, err)
		}
	}
}

func testPins(t *testing.T, b Backend) {
	must(t, b.PutPin(ctx, "pdf", json.RawMessage(`{"sha256":"aa"}`)))
	must(t, b.PutPin(ctx, "zip", json.RawMessage(`{"sha256":"bb"}`)))
	must(t, b.PutPin(ctx, "pdf", json.RawMessage(`{"sha256":"cc"}`)))
	doc, err := b.Pin(ctx, "pdf")
	must(t, err)
	if string(doc) != `{"sha256":"cc"}` {
		t.Errorf("Pin(pdf) = %s", doc)
	}
	pins, err := b.ListPins(ctx)
	must(t, err)
	if len(pins) != 2 || string(pins["zip"]) != `{"sha256":"bb"}` {
		t.Errorf("ListPins = %v", pins)
	}
	must(t, b.DeletePin(ctx, "pdf"))
	if _, err := b.Pin(ctx, "pdf"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("Pin after delete: %v, want ErrNotFound", err)
	}
	if err := b.DeletePin(ctx, "pdf"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("DeletePin of a missing pin: %v, want ErrNotFound", err)
	}
}

func testGrantsAndTrust(t *testing.T, b Backend) {
	must(t, b.PutGrant(ctx, "g1", json.RawMessage(`{"grant": "exec:git"}`)))
	must(t, b.PutGrant(ctx, "g2", json.RawMessage(`{"grant":"net:*"}`)))
	gs, err := b.ListGrants(ctx)
	must(t, err)
	if len(gs) != 2 || string(gs["g1"]) != `{"grant":"exec:git"}` {
		t.Errorf("ListGrants = %v", gs)
	}
	must(t, b.DeleteGrant(ctx, "g1"))
	if err := b.DeleteGrant(ctx, "g1"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("DeleteGrant of a missing grant: %v, want ErrNotFound", err)
	}
	if err := b.PutGrant(ctx, "g3", json.RawMessage(`{`)); !errors.Is(err, store.ErrInvalid) {
		t.Errorf("PutGrant of bad JSON: %v, want ErrInvalid", err)
	}
	const p = "/home/u/project/.warden/policy.yaml"
	if _, err := b.Trust(ctx, p); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("Trust of an untrusted file: %v, want ErrNotFound", err)
	}
	must(t, b.PutTrust(ctx, p, json.RawMessage(`{"sha256":"aa"}`)))
	doc, err := b.Trust(ctx, p)
	must(t, err)
	if string(doc) != `{"sha256":"aa"}` {
		t.Errorf("Trust = %s", doc)
	}
	ts, err := b.ListTrust(ctx)
	must(t, err)
	if len(ts) != 1 {
		t.Errorf("ListTrust = %v", ts)
	}
	must(t, b.DeleteTrust(ctx, p))
	if _, err := b.Trust(ctx, p); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("Trust after delete: %v, want ErrNotFound", err)
	}
}

func testJobs(t *testing.T, b Backend) {
	must(t, b.CreateJob(ctx, "nightly", json.RawMessage(`{"n": 1}`)))
	if err := b.CreateJob(ctx, "nightly", json.RawMessage(`{"n":2}`)); !errors.Is(err, store.ErrInvalid) {
		t.Errorf("CreateJob of a taken name: %v, want ErrInvalid", err)
	}
	must(t, b.UpdateJob(ctx, "nightly", func(doc json.RawMessage) (json.RawMessage, error) {
		if string(doc) != `{"n":1}` {
			t.Errorf("UpdateJob saw %s", doc)
		}
		return json.RawMessage(`{"n":3}`), nil
	}))
	boom := errors.New("boom")
	if err := b.UpdateJob(ctx, "nightly", func(json.RawMessage) (json.RawMessage, error) { return json.RawMessage(`{"n":4}`), boom }); !errors.Is(err, boom) {
		t.Errorf("UpdateJob with an error: %v", err)
	}
	if doc, err := b.Job(ctx, "nightly"); err != nil || string(doc) != `{"n":3}` {
		t.Errorf("Job after a failed update: %s, %v", doc, err)
	}
	if err := b.UpdateJob(ctx, "none", func(d json.RawMessage) (json.RawMessage, error) { return d, nil }); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("UpdateJob of a missing job: %v", err)
	}
	jobs, err := b.ListJobs(ctx)
	must(t, err)
	if len(jobs) != 1 {
		t.Errorf("ListJobs = %v", jobs)
	}
	must(t, b.DeleteJob(ctx, "nightly"))
	if _, err := b.Job(ctx, "nightly"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("Job after delete: %v", err)
	}
}

// testCopies checks that callers own what they get: scribbling on returned
// slices changes nothing stored.
func testCopies(t *testing.T, b Backend) {
	appendEvent(t, b, `{"a":"b"}`)
	must(t, b.PutRun(ctx, "r", json.RawMessage(`{"a":"b"}`)))
	must(t, b.PutPin(ctx, "p", json.RawMessage(`{"a":"b"}`)))
	d, err := b.PutArtifact(ctx, []byte("abc"))
	must(t, err)
	scribble := func(b []byte) {
		for i := range b {
			b[i] = 'X'
		}
	}
	r, err := b.AuditRecord(ctx, 1)
	must(t, err)
	scribble(r.Event)
	run, err := b.Run(ctx, "r")
	must(t, err)
	scribble(run)
	pin, err := b.Pin(ctx, "p")
	must(t, err)
	scribble(pin)
	art, err := b.Artifact(ctx, d)
	must(t, err)
	scribble(art)
	if r, err := b.AuditRecord(ctx, 1); err != nil || string(r.Event) != `{"a":"b"}` {
		t.Errorf("audit record after scribbling: %s, %v", r.Event, err)
	}
	if run, err := b.Run(ctx, "r"); err != nil || string(run) != `{"a":"b"}` {
		t.Errorf("run after scribbling: %s, %v", run, err)
	}
	if pin, err := b.Pin(ctx, "p"); err != nil || string(pin) != `{"a":"b"}` {
		t.Errorf("pin after scribbling: %s, %v", pin, err)
	}
	if art, err := b.Artifact(ctx, d); err != nil || string(art) != "abc" {
		t.Errorf("artifact after scribbling: %s, %v", art, err)
	}
}

// testValueBytes checks that values and documents keep every byte, NUL
// and invalid UTF-8 included (a backend storing text would refuse or
// change them).
func testValueBytes(t *testing.T, b Backend) {
	odd := "nul\x00 byte \xff\xfe and é"
	must(t, b.PutMemory(ctx, "n", "k", odd))
	e, err := b.GetMemory(ctx, "n", "k")
	must(t, err)
	if e.Value != odd {
		t.Errorf("GetMemory = %q, want %q", e.Value, odd)
	}
	hits, err := b.SearchMemory(ctx, store.MemoryQuery{Text: "byte"})
	must(t, err)
	if len(hits) != 1 || hits[0].Value != odd {
		t.Errorf("SearchMemory = %v", hitKeys(hits))
	}
	doc := json.RawMessage(`{"s":"` + "\xff" + `\u0000"}`)
	must(t, b.PutRun(ctx, "r", doc))
	if got, err := b.Run(ctx, "r"); err != nil || string(got) != string(doc) {
		t.Errorf("Run = %q, %v; want %q", got, err, doc)
	}
	seq := appendEvent(t, b, `{"s":"\u0000"}`)
	if r, err := b.AuditRecord(ctx, seq); err != nil || string(r.Event) != `{"s":"\u0000"}` {
		t.Errorf("AuditRecord = %s, %v", r.Event, err)
	}
}
