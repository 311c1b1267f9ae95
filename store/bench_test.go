package store

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/wardenrt/warden/store/internal/memindex"
)

// openBench opens a store in b.TempDir().
func openBench(b *testing.B, opts *Options) *Store {
	b.Helper()
	s, err := Open(filepath.Join(b.TempDir(), "warden.db"), opts)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { s.Close() })
	return s
}

// BenchmarkAppendAudit measures durable appends with 1 and 8 concurrent
// callers; records/s is the figure to read (each record is committed and
// fsynced before its AppendAudit returns).
func BenchmarkAppendAudit(b *testing.B) {
	event := json.RawMessage(`{"phase":"intent","call_id":"c-0001","run_id":"r-20240101","principal":["user"],"tool":"fs.read","args":{"path":"/home/user/notes.txt"},"duration_ms":0}`)
	for _, callers := range []int{1, 8, 32} {
		b.Run(fmt.Sprintf("callers=%d", callers), func(b *testing.B) {
			s := openBench(b, nil)
			ctx := context.Background()
			var wg sync.WaitGroup
			next := make(chan struct{})
			b.ResetTimer()
			start := time.Now()
			for range callers {
				wg.Go(func() {
					for range next {
						if _, err := s.AppendAudit(ctx, event); err != nil {
							b.Error(err)
							return
						}
					}
				})
			}
			for range b.N {
				next <- struct{}{}
			}
			close(next)
			wg.Wait()
			b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "records/s")
		})
	}
}

// BenchmarkBoltCommit is the baseline for BenchmarkAppendAudit: one plain
// bbolt transaction putting one small value, fsync on, one caller, that is
// what one durable commit costs on this disk. Group commit is what lets
// concurrent AppendAudit callers go well past it.
func BenchmarkBoltCommit(b *testing.B) {
	db, err := bolt.Open(filepath.Join(b.TempDir(), "bolt.db"), 0o600, &bolt.Options{Timeout: time.Second})
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	value := []byte(`{"phase":"intent","tool":"fs.read"}`)
	i := uint64(0)
	for b.Loop() {
		i++
		err := db.Update(func(tx *bolt.Tx) error {
			bk, err := tx.CreateBucketIfNotExists([]byte("b"))
			if err != nil {
				return err
			}
			return bk.Put(seqKey(i), value)
		})
		if err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "commits/s")
}

// corpus generates realistic memory text: a vocabulary of synthetic words
// whose frequencies follow Zipf's law, entries of 20 to 60 words.
type corpus struct {
	vocab []string
	zipf  *rand.Zipf
	rng   *rand.Rand
}

func newCorpus(randSeed uint64, words int) *corpus {
	rng := rand.New(rand.NewPCG(randSeed, randSeed^0x9e3779b97f4a7c15))
	consonants := []string{"b", "c", "d", "f", "g", "h", "k", "l", "m", "n", "p", "r", "s", "t", "v", "z", "br", "st", "tr", "ch"}
	vowels := []string{"a", "e", "i", "o", "u", "ai", "ou"}
	seen := make(map[string]bool)
	var vocab []string
	for len(vocab) < words {
		var sb strings.Builder
		for range 2 + rng.IntN(3) {
			sb.WriteString(consonants[rng.IntN(len(consonants))])
			sb.WriteString(vowels[rng.IntN(len(vowels))])
		}
		w := sb.String()
		if !seen[w] && !memindex.IsStopWord(w) {
			seen[w] = true
			vocab = append(vocab, w)
		}
	}
	return &corpus{vocab: vocab, zipf: rand.NewZipf(rng, 1.07, 2, uint64(words-1)), rng: rng}
}

func (c *corpus) word() string { return c.vocab[c.zipf.Uint64()] }

func (c *corpus) text() string {
	n := 20 + c.rng.IntN(41)
	var sb strings.Builder
	for i := range n {
		if i > 0 {
			sb.WriteByte(' ')
		}
		sb.WriteString(c.word())
	}
	sb.WriteByte('.')
	return sb.String()
}

// loadCorpus bulk-loads n entries into s across 10 namespaces.
func loadCorpus(tb testing.TB, s *Store, c *corpus, n int) {
	tb.Helper()
	const perTx = 20000
	batch := make([]MemoryEntry, 0, perTx)
	for i := range n {
		batch = append(batch, MemoryEntry{Namespace: fmt.Sprintf("ns%d", i%10), Key: fmt.Sprintf("entry-%06d", i), Value: c.text()})
		if len(batch) == perTx || i == n-1 {
			if err := s.putMemoryBatch(context.Background(), batch); err != nil {
				tb.Fatal(err)
			}
			batch = batch[:0]
		}
	}
}

// BenchmarkSearchMemory100k searches 100,000 entries with 2- and 3-term
// queries. "uniform" draws query terms uniformly from the vocabulary (most
// are mid- or low-frequency words, like real queries); "zipf" draws them
// like the text, so they include the most frequent words, whose postings
// cover most of the corpus. "uniform-reopen" runs with Linger < 0, so every
// search reopens the file (the cost Options.Linger saves). Besides ns/op it
// reports the median and 99th percentile.
func BenchmarkSearchMemory100k(b *testing.B) {
	path := filepath.Join(b.TempDir(), "warden.db")
	s, err := Open(path, nil)
	if err != nil {
		b.Fatal(err)
	}
	c := newCorpus(1, 5000)
	start := time.Now()
	loadCorpus(b, s, c, 100_000)
	if err := s.Close(); err != nil {
		b.Fatal(err)
	}
	fi, _ := os.Stat(path)
	b.Logf("loaded 100k entries in %v; file %d MiB; %s", time.Since(start).Round(time.Millisecond), fi.Size()>>20, memorySizes(b, path, 100_000))
	ctx := context.Background()
	for _, mode := range []string{"uniform", "zipf", "uniform-reopen"} {
		b.Run(mode, func(b *testing.B) {
			opts := &Options{}
			if mode == "uniform-reopen" {
				opts.Linger = -1
			}
			s, err := Open(path, opts)
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			qrng := rand.New(rand.NewPCG(2, 3))
			var times []time.Duration
			for b.Loop() {
				terms := make([]string, 2+qrng.IntN(2))
				for i := range terms {
					if mode == "zipf" {
						terms[i] = c.word()
					} else {
						terms[i] = c.vocab[qrng.IntN(len(c.vocab))]
					}
				}
				t0 := time.Now()
				hits, err := s.SearchMemory(ctx, MemoryQuery{Text: strings.Join(terms, " ")})
				times = append(times, time.Since(t0))
				if err != nil {
					b.Fatal(err)
				}
				if len(hits) == 0 {
					b.Fatalf("no hits for %v", terms)
				}
			}
			slices.Sort(times)
			b.ReportMetric(float64(times[len(times)/2].Nanoseconds()), "median-ns/op")
			b.ReportMetric(float64(times[len(times)*99/100].Nanoseconds()), "p99-ns/op")
		})
	}
}

// BenchmarkSearchMemoryScale is memory search at WARDEN_SCALE entries
// (skipped without it; the figure is WARDEN_SCALE=1000000), 10
// namespaces, 2- and 3-term queries drawn like the text (zipf: frequent
// words) or uniformly from the vocabulary, with the baseline in the same
// run: the same index scored exhaustively, every posting of every term,
// as the search before block-max pruning did. It reports the median and
// 99th percentile, the load time, and the bytes per entry of the file and
// of each memory bucket.
func BenchmarkSearchMemoryScale(b *testing.B) {
	if os.Getenv("WARDEN_SCALE") == "" {
		b.Skip("set WARDEN_SCALE (e.g. 1000000) to run")
	}
	n := benchScale(b, 0)
	path := filepath.Join(b.TempDir(), "warden.db")
	s, err := Open(path, nil)
	if err != nil {
		b.Fatal(err)
	}
	c := newCorpus(1, 5000)
	start := time.Now()
	loadCorpus(b, s, c, n)
	if err := s.Close(); err != nil {
		b.Fatal(err)
	}
	fi, _ := os.Stat(path)
	b.Logf("loaded %d entries in %v; file %d MiB (%d B per entry); %s", n, time.Since(start).Round(time.Second), fi.Size()>>20, fi.Size()/int64(n), memorySizes(b, path, n))
	s, err = Open(path, nil)
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	for _, mode := range []string{"zipf", "zipf-exhaustive", "uniform", "uniform-exhaustive"} {
		b.Run(mode, func(b *testing.B) {
			qrng := rand.New(rand.NewPCG(2, 3))
			var times []time.Duration
			for b.Loop() {
				terms := make([]string, 2+qrng.IntN(2))
				for i := range terms {
					if strings.HasPrefix(mode, "zipf") {
						terms[i] = c.word()
					} else {
						terms[i] = c.vocab[qrng.IntN(len(c.vocab))]
					}
				}
				t0 := time.Now()
				hits, err := s.searchMemory(context.Background(), MemoryQuery{Text: strings.Join(terms, " ")}, strings.HasSuffix(mode, "exhaustive"))
				times = append(times, time.Since(t0))
				if err != nil || len(hits) == 0 {
					b.Fatalf("%v: %d hits, %v", terms, len(hits), err)
				}
			}
			slices.Sort(times)
			b.ReportMetric(float64(times[len(times)/2].Nanoseconds()), "median-ns/op")
			b.ReportMetric(float64(times[len(times)*99/100].Nanoseconds()), "p99-ns/op")
		})
	}
}

// BenchmarkGetMemory measures a small read with the file kept open
// (default Linger) and reopened for every operation (Linger < 0): the
// difference is what a reopen costs, which DefaultLinger is chosen against.
func BenchmarkGetMemory(b *testing.B) {
	for _, linger := range []time.Duration{0, -1} {
		name := "linger=default"
		if linger < 0 {
			name = "linger=none"
		}
		b.Run(name, func(b *testing.B) {
			s := openBench(b, &Options{Linger: linger})
			ctx := context.Background()
			if err := s.PutMemory(ctx, "ns", "key", "some value"); err != nil {
				b.Fatal(err)
			}
			for b.Loop() {
				if _, err := s.GetMemory(ctx, "ns", "key"); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkPutMemory measures a durable upsert of a 20-60 word entry into
// a store of 10,000 entries.
func BenchmarkPutMemory(b *testing.B) {
	s := openBench(b, nil)
	c := newCorpus(4, 5000)
	loadCorpus(b, s, c, 10_000)
	ctx := context.Background()
	i := 0
	for b.Loop() {
		if err := s.PutMemory(ctx, "bench", fmt.Sprintf("k%d", i%1000), c.text()); err != nil {
			b.Fatal(err)
		}
		i++
	}
}

// BenchmarkVerifyAudit measures verification of a 10,000-record log.
func BenchmarkVerifyAudit(b *testing.B) {
	s := openBench(b, nil)
	ctx := context.Background()
	var wg sync.WaitGroup
	for i := range 10_000 {
		wg.Go(func() {
			if _, err := s.AppendAudit(ctx, json.RawMessage(fmt.Sprintf(`{"tool":"fs.read","run_id":"r1","i":%d}`, i))); err != nil {
				b.Error(err)
			}
		})
	}
	wg.Wait()
	for b.Loop() {
		if rep, err := s.VerifyAudit(ctx); err != nil || rep.Records != 10_000 {
			b.Fatal(rep, err)
		}
	}
	b.ReportMetric(float64(10_000*b.N)/b.Elapsed().Seconds(), "records/s")
}

// benchScale is how many records (or memory entries) the scale benchmarks
// load: WARDEN_SCALE, or def. The figures for a million come from
// WARDEN_SCALE=1000000.
func benchScale(b *testing.B, def int) int {
	b.Helper()
	if v := os.Getenv("WARDEN_SCALE"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n <= 0 {
			b.Fatalf("WARDEN_SCALE=%q: want a positive number", v)
		}
		return n
	}
	return def
}

// benchTools are the tools of loadAudit's records, the first one 40% of
// them, the last one 0.5%.
var benchTools = []string{"fs_read", "shell", "fs_list", "http_get", "fs_write", "memory_search", "git_status", "wasm_textstats"}

// loadAudit appends n gate-like records to s in transactions of 50,000:
// runs of 50 records each, tools drawn from benchTools.
func loadAudit(tb testing.TB, s *Store, n int) {
	tb.Helper()
	weights := []int{400, 200, 150, 100, 80, 40, 25, 5} // per 1000
	rng := rand.New(rand.NewPCG(5, 6))
	tool := func() string {
		x := rng.IntN(1000)
		for i, w := range weights {
			if x < w {
				return benchTools[i]
			}
			x -= w
		}
		return benchTools[0]
	}
	ts := time.Date(2024, 5, 1, 12, 0, 0, 0, time.UTC).Format(time.RFC3339Nano)
	for done := 0; done < n; {
		chunk := min(50_000, n-done)
		events := make([][]byte, chunk)
		for i := range events {
			seq := done + i + 1
			events[i] = fmt.Appendf(nil, `{"phase":"result","call_id":"c-%08d","run_id":"r-%06d","principal":["cli","model"],"tool":%q,"args":{"path":"notes/%d.txt"},"decision":{"action":"allow"},"outcome":"ok","duration_ms":3}`,
				seq, seq/50, tool(), seq%977)
		}
		err := s.update(context.Background(), func(tx *bolt.Tx) error {
			_, err := appendRecords(tx, ts, events)
			return err
		})
		if err != nil {
			tb.Fatal(err)
		}
		done += chunk
	}
	if err := s.anchorToHead(context.Background()); err != nil {
		tb.Fatal(err)
	}
}

// anchorToHead writes the anchor of the current head (what the background
// writer does after AppendAudit; loadAudit bypasses it).
func (s *Store) anchorToHead(ctx context.Context) error {
	var head anchor
	err := s.view(ctx, func(tx *bolt.Tx) error {
		var err error
		head, err = auditHead(tx.Bucket(bucketAudit))
		return err
	})
	if err != nil {
		return err
	}
	return writeAnchor(s.anchorPath, head)
}

// auditBenchStore is a store of benchScale(100,000) records, loaded once
// per benchmark run and shared by its sub-benchmarks.
func auditBenchStore(b *testing.B) (path string, n int) {
	n = benchScale(b, 100_000)
	path = filepath.Join(b.TempDir(), "warden.db")
	s, err := Open(path, nil)
	if err != nil {
		b.Fatal(err)
	}
	start := time.Now()
	loadAudit(b, s, n)
	if err := s.Close(); err != nil {
		b.Fatal(err)
	}
	fi, _ := os.Stat(path)
	b.Logf("loaded %d audit records in %v; file %d MiB", n, time.Since(start).Round(time.Millisecond), fi.Size()>>20)
	return path, n
}

// BenchmarkAuditList is "warden audit ls --tool T --last 20" and
// "audit ls --run ID" on a log of benchScale(100,000) records, through the
// index and, as the baseline, by the scan it replaces (every record read,
// the matching ones kept, the last 20 shown). T is the rarest tool (0.5%
// of the records) and the most common one (40%); ID is a run of 50
// records in the middle of the log.
func BenchmarkAuditList(b *testing.B) {
	path, n := auditBenchStore(b)
	s, err := Open(path, nil)
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	ctx := context.Background()
	run := fmt.Sprintf("r-%06d", n/100)
	cases := []struct {
		name string
		f    AuditFilter
		want int
	}{
		{"tool-rare-last20", AuditFilter{Tool: benchTools[len(benchTools)-1], Limit: 20, Newest: true}, 20},
		{"tool-common-last20", AuditFilter{Tool: benchTools[0], Limit: 20, Newest: true}, 20},
		{"run", AuditFilter{RunID: run}, 50},
	}
	for _, tc := range cases {
		b.Run(tc.name+"/index", func(b *testing.B) {
			for b.Loop() {
				recs, err := s.ListAudit(ctx, tc.f)
				if err != nil || len(recs) != tc.want {
					b.Fatal(len(recs), err)
				}
			}
		})
		b.Run(tc.name+"/scan", func(b *testing.B) {
			for b.Loop() {
				f := tc.f
				f.Limit, f.Newest = 0, false
				l := &auditList{f: f, path: s.path}
				if err := s.listScan(ctx, l, 0); err != nil {
					b.Fatal(err)
				}
				if recs := l.result(); len(recs) < tc.want {
					b.Fatal(len(recs))
				}
			}
		})
	}
}

// BenchmarkVerifyAuditScale is "warden audit verify" of benchScale(100,000)
// records (the chain, the anchor and the index); records/s is the rate.
func BenchmarkVerifyAuditScale(b *testing.B) {
	path, n := auditBenchStore(b)
	s, err := Open(path, nil)
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	for b.Loop() {
		if rep, err := s.VerifyAudit(context.Background()); err != nil || rep.Records != uint64(n) {
			b.Fatal(rep, err)
		}
	}
	b.ReportMetric(float64(n*b.N)/b.Elapsed().Seconds(), "records/s")
}

// BenchmarkAuditIndexBuild is what the first "audit ls --tool" after an
// upgrade costs: building the index of benchScale(100,000) records made
// without it.
func BenchmarkAuditIndexBuild(b *testing.B) {
	path, n := auditBenchStore(b)
	s, err := Open(path, nil)
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	ctx := context.Background()
	for b.Loop() {
		err := s.update(ctx, func(tx *bolt.Tx) error {
			if err := tx.DeleteBucket(bucketAuditIndex); err != nil {
				return err
			}
			_, err := tx.CreateBucket(bucketAuditIndex)
			if err == nil {
				err = tx.Bucket(bucketMeta).Delete(auditIndexedKey)
			}
			return err
		})
		if err != nil {
			b.Fatal(err)
		}
		if recs, err := s.ListAudit(ctx, AuditFilter{Tool: benchTools[0], Limit: 1}); err != nil || len(recs) != 1 {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(n*b.N)/b.Elapsed().Seconds(), "records/s")
}

// memorySizes says how many bytes per entry the memory buckets of the
// store at path take: in use (the keys and values, and their pages'
// headers) and allocated (whole pages).
func memorySizes(tb testing.TB, path string, n int) string {
	tb.Helper()
	db, err := bolt.Open(path, 0o600, &bolt.Options{ReadOnly: true, Timeout: time.Second})
	if err != nil {
		tb.Fatal(err)
	}
	defer db.Close()
	var out []string
	err = db.View(func(tx *bolt.Tx) error {
		for _, name := range []string{"memory", "memory_postings", "memory_terms", "memory_stats", "memory_index"} {
			if b := tx.Bucket([]byte(name)); b != nil {
				st := b.Stats()
				inuse := st.BranchInuse + st.LeafInuse
				alloc := st.BranchAlloc + st.LeafAlloc
				out = append(out, fmt.Sprintf("%s %d/%d B", name, inuse/n, alloc/n))
			}
		}
		return nil
	})
	if err != nil {
		tb.Fatal(err)
	}
	return "per entry (in use/allocated): " + strings.Join(out, ", ")
}
