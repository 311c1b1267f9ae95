package postgres_test

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

	"github.com/wardenrt/warden/store"
	"github.com/wardenrt/warden/store/postgres"
	"github.com/wardenrt/warden/store/postgres/pgtest"
	"github.com/wardenrt/warden/store/storetest"
)

// The benchmarks run each case on both backends side by side: the bbolt
// file (fsync on) and PostgreSQL on this machine with fsync and
// synchronous_commit on (pgtest.Config{Durable: true}), over TCP on
// 127.0.0.1.

// benchBackends opens a fresh store of each backend.
func benchBackends(b *testing.B) map[string]func(b *testing.B) store.Backend {
	return map[string]func(b *testing.B) store.Backend{
		"bbolt": func(b *testing.B) store.Backend {
			s, err := store.Open(filepath.Join(b.TempDir(), "warden.db"), nil)
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { s.Close() })
			return s
		},
		"postgres": func(b *testing.B) store.Backend {
			srv := pgtest.Shared(b, pgtest.Config{Durable: true})
			url := srv.URL(srv.Database(b))
			if _, err := postgres.Migrate(ctx, url, nil); err != nil {
				b.Fatal(err)
			}
			s, err := postgres.Open(ctx, url, &postgres.Options{AnchorDir: b.TempDir(), Host: "bench"})
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { s.Close() })
			return s
		},
	}
}

// BenchmarkAppendAudit measures durable appends with 1, 8 and 32
// concurrent callers; records/s is the figure to read. Each record is
// committed (bbolt: fsynced; PostgreSQL: its WAL flushed, synchronous_commit
// on) before AppendAudit returns; concurrent callers of one process share
// commits on both.
func BenchmarkAppendAudit(b *testing.B) {
	event := json.RawMessage(`{"phase":"intent","call_id":"c-0001","run_id":"r-20240101","principal":["user"],"tool":"fs.read","args":{"path":"/home/user/notes.txt"},"duration_ms":0}`)
	for _, backend := range []string{"bbolt", "postgres"} {
		for _, callers := range []int{1, 8, 32} {
			b.Run(fmt.Sprintf("backend=%s/callers=%d", backend, callers), func(b *testing.B) {
				s := benchBackends(b)[backend](b)
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
}

// BenchmarkSearchMemory100k searches 100,000 entries (10 namespaces) with 2-
// and 3-term queries on both backends: "uniform" draws the terms uniformly
// from the vocabulary (mostly mid- and low-frequency words), "zipf" as the
// text does (frequent words, whose entries are most of the corpus). It
// reports the median and 99th percentile, and checks on the way that both
// backends return the same hits with the same scores.
func BenchmarkSearchMemory100k(b *testing.B) {
	c := storetest.NewCorpus(1, 5000)
	entries := make([]store.MemoryEntry, 100_000)
	for i := range entries {
		entries[i] = store.MemoryEntry{Namespace: fmt.Sprintf("ns%d", i%10), Key: fmt.Sprintf("entry-%06d", i), Value: c.Text()}
	}
	stores := map[string]store.Backend{}
	for name, open := range benchBackends(b) {
		s := open(b)
		start := time.Now()
		for i := 0; i < len(entries); i += 5000 {
			batch := entries[i:min(len(entries), i+5000)]
			var err error
			switch s := s.(type) {
			case *store.Store:
				err = s.PutMemoryBatch(ctx, batch)
			case *postgres.Store:
				err = s.ImportMemory(ctx, batch)
			}
			if err != nil {
				b.Fatal(err)
			}
		}
		b.Logf("%s: loaded 100k entries in %v", name, time.Since(start).Round(time.Millisecond))
		stores[name] = s
	}
	for _, mode := range []string{"uniform", "zipf"} {
		queries := make([]string, 200)
		qrng := rand.New(rand.NewPCG(2, 3))
		for i := range queries {
			terms := make([]string, 2+qrng.IntN(2))
			for j := range terms {
				if mode == "zipf" {
					terms[j] = c.Word()
				} else {
					terms[j] = c.Vocab[qrng.IntN(len(c.Vocab))]
				}
			}
			queries[i] = strings.Join(terms, " ")
		}
		for i, q := range queries[:20] {
			bh, err1 := stores["bbolt"].SearchMemory(ctx, store.MemoryQuery{Text: q})
			ph, err2 := stores["postgres"].SearchMemory(ctx, store.MemoryQuery{Text: q})
			if err1 != nil || err2 != nil || len(bh) != len(ph) {
				b.Fatalf("query %d %q: %d and %d hits, %v %v", i, q, len(bh), len(ph), err1, err2)
			}
			for j := range bh {
				if bh[j].Key != ph[j].Key || bh[j].Score != ph[j].Score {
					b.Fatalf("query %q hit %d: bbolt %s %v, postgres %s %v", q, j, bh[j].Key, bh[j].Score, ph[j].Key, ph[j].Score)
				}
			}
		}
		for _, backend := range []string{"bbolt", "postgres"} {
			b.Run(fmt.Sprintf("backend=%s/%s", backend, mode), func(b *testing.B) {
				s := stores[backend]
				var times []time.Duration
				i := 0
				for b.Loop() {
					t0 := time.Now()
					hits, err := s.SearchMemory(ctx, store.MemoryQuery{Text: queries[i%len(queries)]})
					times = append(times, time.Since(t0))
					if err != nil || len(hits) == 0 {
						b.Fatalf("%q: %d hits, %v", queries[i%len(queries)], len(hits), err)
					}
					i++
				}
				slices.Sort(times)
				b.ReportMetric(float64(times[len(times)/2].Nanoseconds()), "median-ns/op")
				b.ReportMetric(float64(times[len(times)*99/100].Nanoseconds()), "p99-ns/op")
			})
		}
	}
}

var _ = context.Background

// BenchmarkAuditListPostgres is "warden audit ls --tool T --last 20" and
// "--run ID" on a PostgreSQL log of WARDEN_SCALE (default 100,000)
// records, through the indexes of migration 4 and, as the baseline, by the
// scan they replace (every record read and tested, the last 20 kept).
func BenchmarkAuditListPostgres(b *testing.B) {
	n := 100_000
	if v := os.Getenv("WARDEN_SCALE"); v != "" {
		var err error
		if n, err = strconv.Atoi(v); err != nil || n <= 0 {
			b.Fatalf("WARDEN_SCALE=%q", v)
		}
	}
	s := benchBackends(b)["postgres"](b).(*postgres.Store)
	tools := []string{"fs_read", "shell", "fs_list", "http_get", "fs_write", "memory_search", "git_status", "wasm_textstats"}
	weights := []int{400, 200, 150, 100, 80, 40, 25, 5}
	rng := rand.New(rand.NewPCG(5, 6))
	prev := store.ZeroHash
	ts := store.FormatRecordTime(time.Date(2024, 5, 1, 12, 0, 0, 0, time.UTC))
	start := time.Now()
	for done := 0; done < n; {
		recs := make([]store.AuditRecord, min(10_000, n-done))
		for i := range recs {
			seq := uint64(done + i + 1)
			x, tool := rng.IntN(1000), tools[0]
			for j, w := range weights {
				if x < w {
					tool = tools[j]
					break
				}
				x -= w
			}
			ev := fmt.Appendf(nil, `{"phase":"result","call_id":"c-%08d","run_id":"r-%06d","principal":["cli","model"],"tool":%q,"args":{"path":"notes/%d.txt"},"decision":{"action":"allow"},"outcome":"ok","duration_ms":3}`,
				seq, seq/50, tool, seq%977)
			_, hash := store.EncodeRecord(seq, ts, prev, ev)
			t, _ := time.Parse(time.RFC3339Nano, ts)
			recs[i] = store.AuditRecord{Seq: seq, Time: t, Prev: prev, Hash: hash, Event: ev}
			prev = hash
		}
		if err := s.ImportAudit(ctx, recs); err != nil {
			b.Fatal(err)
		}
		done += len(recs)
	}
	b.Logf("loaded %d records in %v", n, time.Since(start).Round(time.Millisecond))
	run := fmt.Sprintf("r-%06d", n/100)
	for _, tc := range []struct {
		name string
		f    store.AuditFilter
		want int
	}{
		{"tool-rare-last20", store.AuditFilter{Tool: tools[len(tools)-1], Limit: 20, Newest: true}, 20},
		{"tool-common-last20", store.AuditFilter{Tool: tools[0], Limit: 20, Newest: true}, 20},
		{"run", store.AuditFilter{RunID: run}, 50},
	} {
		b.Run(tc.name+"/index", func(b *testing.B) {
			for b.Loop() {
				if recs, err := s.ListAudit(ctx, tc.f); err != nil || len(recs) != tc.want {
					b.Fatal(len(recs), err)
				}
			}
		})
		b.Run(tc.name+"/scan", func(b *testing.B) {
			for b.Loop() {
				if recs, err := s.ListAuditByScan(ctx, tc.f); err != nil || len(recs) != tc.want {
					b.Fatal(len(recs), err)
				}
			}
		})
	}
}
