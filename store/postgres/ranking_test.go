package postgres_test

import (
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"strings"
	"testing"

	"github.com/wardenrt/warden/store"
)

// TestRankingMatchesBbolt loads the same entries into a bbolt store and a
// PostgreSQL store and checks that every query returns the same hits, in
// the same order, with bit-identical scores — with and without a namespace
// filter, after updates and deletes.
func TestRankingMatchesBbolt(t *testing.T) {
	_, _, url := newDB(t)
	pg := openStore(t, url, t.TempDir(), nil)
	bb, err := store.Open(filepath.Join(t.TempDir(), "warden.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer bb.Close()

	rng := rand.New(rand.NewPCG(7, 11))
	vocab := []string{"deploy", "pipeline", "Zeppelin", "kumquat", "walrus", "release", "rollback", "canary",
		"postgres", "bbolt", "ÉCOLE", "école", "naïve", "日本語", "x1", "v2", "build", "service", "test", "alpha"}
	text := func() string {
		n := 1 + rng.IntN(30)
		var sb strings.Builder
		for i := range n {
			if i > 0 {
				sb.WriteString([]string{" ", ", ", ". ", "-", " the "}[rng.IntN(5)])
			}
			sb.WriteString(vocab[rng.IntN(len(vocab))])
		}
		return sb.String()
	}
	both := func(fn func(b store.Backend) error) {
		t.Helper()
		if err := fn(bb); err != nil {
			t.Fatal(err)
		}
		if err := fn(pg); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 160 {
		ns, key, value := fmt.Sprintf("ns%d", i%4), fmt.Sprintf("k%03d", i%70), text()
		both(func(b store.Backend) error { return b.PutMemory(ctx, ns, key, value) })
		if i%17 == 0 {
			both(func(b store.Backend) error { return b.DeleteMemory(ctx, ns, key) })
		}
	}
	queries := []string{"deploy", "zeppelin release", "kumquat walrus canary", "école naive", "日本語 x1", "the", "build test service alpha v2", "nothing here"}
	filters := map[string]func(string) bool{"all": nil, "ns1+ns3": func(ns string) bool { return ns == "ns1" || ns == "ns3" }}
	for _, q := range queries {
		for fname, f := range filters {
			for _, limit := range []int{0, 3, 50} {
				mq := store.MemoryQuery{Text: q, Namespace: f, Limit: limit}
				want, err := bb.SearchMemory(ctx, mq)
				if err != nil {
					t.Fatal(err)
				}
				got, err := pg.SearchMemory(ctx, mq)
				if err != nil {
					t.Fatal(err)
				}
				if len(got) != len(want) {
					t.Errorf("%q (%s, limit %d): %d hits on PostgreSQL, %d on bbolt", q, fname, limit, len(got), len(want))
					continue
				}
				for i := range want {
					w, g := want[i], got[i]
					if g.Namespace != w.Namespace || g.Key != w.Key || g.Value != w.Value || g.Score != w.Score {
						t.Errorf("%q (%s, limit %d) hit %d: PostgreSQL %s/%s %v, bbolt %s/%s %v", q, fname, limit, i, g.Namespace, g.Key, g.Score, w.Namespace, w.Key, w.Score)
					}
				}
			}
		}
	}
}
