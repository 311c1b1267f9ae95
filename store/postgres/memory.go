package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/wardenrt/warden/store"
)

// Memory entries are rows of warden.memory. Each row carries the entry's
// terms as warden's tokenizer makes them: as a tsvector of exactly those
// lexemes (array_to_tsvector: no parser, no stemming) for the GIN index
// that finds candidates, and as a jsonb of their frequencies plus the
// entry's length for the ranking. SearchMemory ranks by warden's BM25 in
// SQL, with the same IEEE operations in the same order as the bbolt store
// (store.BM25Term), so both backends return the same hits in the same
// order with the same scores.

func validEntry(ns, key string) error {
	if err := store.ValidName("memory namespace", ns); err != nil {
		return err
	}
	return store.ValidName("memory key", key)
}

func (s *Store) clock() time.Time {
	if s.now != nil {
		return s.now()
	}
	return time.Now()
}

// indexed is what a value contributes to the index.
type indexed struct {
	dl    int32
	tf    []byte // jsonb {"term": n}
	terms []string
}

func indexValue(value string) (indexed, error) {
	tf, dl := store.TermFreqs(value)
	b, err := json.Marshal(tf)
	if err != nil {
		return indexed{}, err
	}
	return indexed{dl: int32(dl), tf: b, terms: slices.Sorted(maps.Keys(tf))}, nil
}

// PutMemory creates or replaces the entry ns/key.
func (s *Store) PutMemory(ctx context.Context, ns, key, value string) error {
	if err := validEntry(ns, key); err != nil {
		return err
	}
	ix, err := indexValue(value)
	if err != nil {
		return err
	}
	return s.inTx(ctx, "writing memory", pgx.TxOptions{}, func(ctx context.Context, tx pgx.Tx) error {
		return putMemoryTx(ctx, tx, ns, key, []byte(value), ix, s.clock().UnixNano())
	})
}

// putMemoryTx upserts one entry and its namespace's statistics.
func putMemoryTx(ctx context.Context, tx pgx.Tx, ns, key string, value []byte, ix indexed, now int64) error {
	for {
		var oldDL int32
		err := tx.QueryRow(ctx, `SELECT dl FROM warden.memory WHERE ns = $1 AND key = $2 FOR UPDATE`, ns, key).Scan(&oldDL)
		if err == nil {
			if _, err := tx.Exec(ctx, `UPDATE warden.memory SET value = $3, updated_ns = $4, dl = $5, tf = $6, lexemes = array_to_tsvector($7::text[])
				WHERE ns = $1 AND key = $2`, ns, key, value, now, ix.dl, ix.tf, ix.terms); err != nil {
				return err
			}
			_, err = tx.Exec(ctx, `UPDATE warden.memory_stats SET total = total + $2 WHERE ns = $1`, ns, int64(ix.dl)-int64(oldDL))
			return err
		}
		if !errors.Is(err, pgx.ErrNoRows) {
			return err
		}
		tag, err := tx.Exec(ctx, `INSERT INTO warden.memory (ns, key, value, created_ns, updated_ns, dl, tf, lexemes)
			VALUES ($1, $2, $3, $4, $4, $5, $6, array_to_tsvector($7::text[])) ON CONFLICT DO NOTHING`,
			ns, key, value, now, ix.dl, ix.tf, ix.terms)
		if err != nil {
			return err
		}
		if tag.RowsAffected() == 0 {
			continue // created meanwhile by another writer: update it
		}
		_, err = tx.Exec(ctx, `INSERT INTO warden.memory_stats (ns, docs, total) VALUES ($1, 1, $2)
			ON CONFLICT (ns) DO UPDATE SET docs = warden.memory_stats.docs + 1, total = warden.memory_stats.total + EXCLUDED.total`, ns, int64(ix.dl))
		return err
	}
}

const entryColumns = `ns, key, value, created_ns, updated_ns`

func scanEntry(row pgx.Row, extra ...any) (store.MemoryEntry, error) {
	var e store.MemoryEntry
	var value []byte
	var created, updated int64
	if err := row.Scan(append([]any{&e.Namespace, &e.Key, &value, &created, &updated}, extra...)...); err != nil {
		return e, err
	}
	e.Value = string(value)
	e.Created, e.Updated = time.Unix(0, created).UTC(), time.Unix(0, updated).UTC()
	return e, nil
}

// GetMemory returns the entry ns/key, or an error wrapping ErrNotFound.
func (s *Store) GetMemory(ctx context.Context, ns, key string) (store.MemoryEntry, error) {
	if err := validEntry(ns, key); err != nil {
		return store.MemoryEntry{}, err
	}
	var e store.MemoryEntry
	err := s.do(ctx, "reading memory", func(ctx context.Context) error {
		var err error
		e, err = scanEntry(s.pool.QueryRow(ctx, `SELECT `+entryColumns+` FROM warden.memory WHERE ns = $1 AND key = $2`, ns, key))
		if errors.Is(err, pgx.ErrNoRows) {
			return fmt.Errorf("memory %s/%s: %w", ns, key, store.ErrNotFound)
		}
		return err
	})
	return e, err
}

// ListMemory returns the entries of namespace ns ("" for all) ordered by
// namespace and key, at most limit of them (<= 0: all).
func (s *Store) ListMemory(ctx context.Context, ns string, limit int) ([]store.MemoryEntry, error) {
	if ns != "" {
		if err := store.ValidName("memory namespace", ns); err != nil {
			return nil, err
		}
	}
	var out []store.MemoryEntry
	err := s.do(ctx, "listing memory", func(ctx context.Context) error {
		lim := any(nil)
		if limit > 0 {
			lim = limit
		}
		rows, err := s.pool.Query(ctx, `SELECT `+entryColumns+` FROM warden.memory WHERE ($1 = '' OR ns = $1) ORDER BY ns, key LIMIT $2`, ns, lim)
		if err != nil {
			return err
		}
		out, err = pgx.CollectRows(rows, func(r pgx.CollectableRow) (store.MemoryEntry, error) { return scanEntry(r) })
		return err
	})
	return out, err
}

// DeleteMemory removes the entry ns/key, or returns an error wrapping
// ErrNotFound.
func (s *Store) DeleteMemory(ctx context.Context, ns, key string) error {
	if err := validEntry(ns, key); err != nil {
		return err
	}
	return s.inTx(ctx, "deleting memory", pgx.TxOptions{}, func(ctx context.Context, tx pgx.Tx) error {
		var dl int32
		err := tx.QueryRow(ctx, `DELETE FROM warden.memory WHERE ns = $1 AND key = $2 RETURNING dl`, ns, key).Scan(&dl)
		if errors.Is(err, pgx.ErrNoRows) {
			return fmt.Errorf("memory %s/%s: %w", ns, key, store.ErrNotFound)
		}
		if err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `UPDATE warden.memory_stats SET docs = docs - 1, total = total - $2 WHERE ns = $1`, ns, int64(dl)); err != nil {
			return err
		}
		_, err = tx.Exec(ctx, `DELETE FROM warden.memory_stats WHERE ns = $1 AND docs <= 0`, ns)
		return err
	})
}

// tsquery is the query matching any of terms. Terms are letters and
// digits only; quotes and backslashes are escaped all the same.
func tsquery(terms []string) string {
	parts := make([]string, len(terms))
	for i, t := range terms {
		t = strings.ReplaceAll(t, `\`, `\\`)
		parts[i] = "'" + strings.ReplaceAll(t, `'`, `''`) + "'"
	}
	return strings.Join(parts, " | ")
}

// SearchMemory ranks the entries matching any term of q.Text by BM25 and
// returns the best q.Limit, best first, ties by namespace and key — as the
// bbolt store does. One read-only snapshot: the namespaces' statistics,
// the document frequency of each term over the selected namespaces, then
// the scoring and the top entries, all in the database.
func (s *Store) SearchMemory(ctx context.Context, q store.MemoryQuery) ([]store.MemoryHit, error) {
	terms := store.QueryTerms(q.Text)
	if len(terms) == 0 {
		return nil, ctx.Err()
	}
	limit := q.Limit
	if limit <= 0 {
		limit = 10
	}
	var hits []store.MemoryHit
	err := s.inTx(ctx, "searching memory", readOnly, func(ctx context.Context, tx pgx.Tx) error {
		hits = nil
		rows, err := tx.Query(ctx, `SELECT ns, docs, total FROM warden.memory_stats`)
		if err != nil {
			return err
		}
		var allowed []string
		var docs, total int64
		var ns string
		var d, t int64
		_, err = pgx.ForEachRow(rows, []any{&ns, &d, &t}, func() error {
			if q.Namespace != nil {
				if !q.Namespace(ns) {
					return nil
				}
				allowed = append(allowed, ns)
			}
			docs += d
			total += t
			return nil
		})
		if err != nil || docs <= 0 {
			return err
		}
		avgdl := float64(total) / float64(docs)
		if avgdl == 0 {
			avgdl = 1
		}
		var nsFilter any // nil: every namespace
		if q.Namespace != nil {
			nsFilter = allowed
		}
		query := tsquery(terms)

		// Document frequencies over the selected namespaces (one lexeme
		// looked up in each candidate's tsvector).
		var counts []string
		args := []any{query, nsFilter}
		for _, term := range terms {
			args = append(args, tsquery([]string{term}))
			counts = append(counts, fmt.Sprintf("count(*) FILTER (WHERE lexemes @@ $%d::tsquery)", len(args)))
		}
		dfs := make([]int64, len(terms))
		dest := make([]any, len(terms))
		for i := range dfs {
			dest[i] = &dfs[i]
		}
		err = tx.QueryRow(ctx, `SELECT `+strings.Join(counts, ", ")+` FROM warden.memory
			WHERE lexemes @@ $1::tsquery AND ($2::text[] IS NULL OR ns = ANY($2))`, args...).Scan(dest...)
		if err != nil {
			return err
		}
		if !slices.ContainsFunc(dfs, func(df int64) bool { return df > 0 }) {
			return nil
		}
		// The score: each term's contribution, added in query order. Each
		// term's frequency is looked up once per candidate (OFFSET 0 keeps
		// the subquery from being folded into the expression, which would
		// look it up again for every use).
		args = []any{query, nsFilter, avgdl, limit}
		score := "0::float8"
		var freqs []string
		for i, term := range terms {
			if dfs[i] == 0 {
				continue
			}
			args = append(args, term, store.BM25IDF(uint64(docs), uint64(dfs[i])))
			tp, ip := len(args)-1, len(args)
			f := fmt.Sprintf("f%d", i)
			freqs = append(freqs, fmt.Sprintf("coalesce((tf->>$%d)::float8, 0::float8) AS %s", tp, f))
			score = fmt.Sprintf("(%s + %s)", score, store.BM25SQL("$"+strconv.Itoa(ip)+"::float8", f, "d", "$3::float8"))
		}
		rows, err = tx.Query(ctx, `WITH top AS (
				SELECT ns, key, `+score+` AS score FROM (
					SELECT ns, key, dl::float8 AS d, `+strings.Join(freqs, ", ")+` FROM warden.memory
					WHERE lexemes @@ $1::tsquery AND ($2::text[] IS NULL OR ns = ANY($2)) OFFSET 0) c
				ORDER BY score DESC, ns, key LIMIT $4)
			SELECT m.ns, m.key, m.value, m.created_ns, m.updated_ns, top.score
			FROM top JOIN warden.memory m USING (ns, key)
			ORDER BY top.score DESC, m.ns, m.key`, args...)
		if err != nil {
			return err
		}
		hits, err = pgx.CollectRows(rows, func(r pgx.CollectableRow) (store.MemoryHit, error) {
			var h store.MemoryHit
			var err error
			h.MemoryEntry, err = scanEntry(r, &h.Score)
			return h, err
		})
		return err
	})
	return hits, err
}

// putMemoryBatch upserts entries in one transaction (copies, bulk loads),
// keeping their times (zero times: now). Entries new to the store are
// inserted together; the others one by one.
func (s *Store) putMemoryBatch(ctx context.Context, entries []store.MemoryEntry) error {
	ixs := make([]indexed, len(entries))
	seen := make(map[[2]string]bool, len(entries))
	for i, e := range entries {
		if err := validEntry(e.Namespace, e.Key); err != nil {
			return err
		}
		k := [2]string{e.Namespace, e.Key}
		if seen[k] {
			return fmt.Errorf("%w: memory %s/%s is twice in one batch", store.ErrInvalid, e.Namespace, e.Key)
		}
		seen[k] = true
		var err error
		if ixs[i], err = indexValue(e.Value); err != nil {
			return err
		}
	}
	now := s.clock().UnixNano()
	times := func(e store.MemoryEntry) (int64, int64) {
		c, u := now, now
		if !e.Created.IsZero() {
			c = e.Created.UnixNano()
		}
		if !e.Updated.IsZero() {
			u = e.Updated.UnixNano()
		}
		return c, u
	}
	return s.inTx(ctx, "writing memory", pgx.TxOptions{}, func(ctx context.Context, tx pgx.Tx) error {
		nss, keys := make([]string, len(entries)), make([]string, len(entries))
		for i, e := range entries {
			nss[i], keys[i] = e.Namespace, e.Key
		}
		rows, err := tx.Query(ctx, `SELECT m.ns, m.key FROM warden.memory m JOIN unnest($1::text[], $2::text[]) AS x(ns, key)
			ON m.ns = x.ns AND m.key = x.key FOR UPDATE OF m`, nss, keys)
		if err != nil {
			return err
		}
		exists := map[[2]string]bool{}
		var ns, key string
		if _, err := pgx.ForEachRow(rows, []any{&ns, &key}, func() error { exists[[2]string{ns, key}] = true; return nil }); err != nil {
			return err
		}
		var n int
		cols := struct {
			ns, key, tf, terms []string
			value              [][]byte
			created, updated   []int64
			dl                 []int32
		}{}
		stats := map[string][2]int64{}
		for i, e := range entries {
			c, u := times(e)
			if exists[[2]string{e.Namespace, e.Key}] {
				if err := putMemoryTx(ctx, tx, e.Namespace, e.Key, []byte(e.Value), ixs[i], u); err != nil {
					return err
				}
				if _, err := tx.Exec(ctx, `UPDATE warden.memory SET created_ns = $3 WHERE ns = $1 AND key = $2`, e.Namespace, e.Key, c); err != nil {
					return err
				}
				continue
			}
			n++
			cols.ns, cols.key, cols.value = append(cols.ns, e.Namespace), append(cols.key, e.Key), append(cols.value, []byte(e.Value))
			cols.created, cols.updated, cols.dl = append(cols.created, c), append(cols.updated, u), append(cols.dl, ixs[i].dl)
			cols.tf, cols.terms = append(cols.tf, string(ixs[i].tf)), append(cols.terms, strings.Join(ixs[i].terms, " "))
			st := stats[e.Namespace]
			stats[e.Namespace] = [2]int64{st[0] + 1, st[1] + int64(ixs[i].dl)}
		}
		if n == 0 {
			return nil
		}
		// Terms are letters and digits: joined by spaces, split again.
		if _, err := tx.Exec(ctx, `INSERT INTO warden.memory (ns, key, value, created_ns, updated_ns, dl, tf, lexemes)
			SELECT ns, key, value, c, u, dl, tf::jsonb, array_to_tsvector(string_to_array(terms, ' '))
			FROM unnest($1::text[], $2::text[], $3::bytea[], $4::bigint[], $5::bigint[], $6::int[], $7::text[], $8::text[])
				AS x(ns, key, value, c, u, dl, tf, terms)`,
			cols.ns, cols.key, cols.value, cols.created, cols.updated, cols.dl, cols.tf, cols.terms); err != nil {
			return err
		}
		for ns, st := range stats {
			if _, err := tx.Exec(ctx, `INSERT INTO warden.memory_stats (ns, docs, total) VALUES ($1, $2, $3)
				ON CONFLICT (ns) DO UPDATE SET docs = warden.memory_stats.docs + EXCLUDED.docs, total = warden.memory_stats.total + EXCLUDED.total`,
				ns, st[0], st[1]); err != nil {
				return err
			}
		}
		return nil
	})
}
