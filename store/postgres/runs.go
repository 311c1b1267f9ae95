package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/wardenrt/warden/internal/runpatch"
	"github.com/wardenrt/warden/store"
)

// Runs: a row of warden.runs per run. A run written whole (PutRun,
// UpdateRun) has its document in doc; a run written in parts (PatchRun)
// has its head there, its lists named in list_fields with their lengths in
// list_lens, and their elements in warden.run_items — as the bbolt store
// keeps them, and given back whole alike.

// putWhole is PutRun's statement: the document, whole, its parts dropped.
const putWhole = `WITH dropped AS (DELETE FROM warden.run_items WHERE id = $1)
	INSERT INTO warden.runs (id, doc) VALUES ($1, $2)
	ON CONFLICT (id) DO UPDATE SET doc = EXCLUDED.doc, list_fields = NULL, list_lens = NULL`

// PutRun creates or replaces the document of run id, whole.
func (s *Store) PutRun(ctx context.Context, id string, doc json.RawMessage) error {
	if err := store.ValidName("run", id); err != nil {
		return err
	}
	v, err := store.CompactDoc("run "+id, doc)
	if err != nil {
		return err
	}
	return s.do(ctx, "writing a run", func(ctx context.Context) error {
		_, err := s.pool.Exec(ctx, putWhole, id, v)
		return err
	})
}

// PatchRun writes run id's record in parts (see runpatch.Patch), as the
// bbolt store does: the head and the elements sent, in one transaction
// holding the run's row; an element neither held nor sent is an error
// wrapping store.ErrConflict, and nothing is written.
func (s *Store) PatchRun(ctx context.Context, id string, p runpatch.Patch) error {
	if err := store.ValidName("run", id); err != nil {
		return err
	}
	c, err := runpatch.Check(p)
	if err != nil {
		return fmt.Errorf("%w: run %s: %v", store.ErrInvalid, id, err)
	}
	var ids []string
	var lists, ns []int32
	var docs [][]byte
	for li, set := range c.Set {
		for n, e := range set {
			ids, lists, ns, docs = append(ids, id), append(lists, int32(li)), append(ns, int32(n)), append(docs, e)
		}
	}
	lens := make([]int32, len(c.Lens))
	for i, n := range c.Lens {
		lens[i] = int32(n)
	}
	return s.inTx(ctx, "writing a run", pgx.TxOptions{}, func(ctx context.Context, tx pgx.Tx) error {
		var st runpatch.Stored
		var fields []string
		var held []int32
		err := tx.QueryRow(ctx, `SELECT list_fields, list_lens FROM warden.runs WHERE id = $1 FOR UPDATE`, id).Scan(&fields, &held)
		stored := &st
		switch {
		case errors.Is(err, pgx.ErrNoRows) || err == nil && fields == nil:
			stored = nil
		case err != nil:
			return err
		}
		st.Fields = fields
		for _, n := range held {
			st.Lens = append(st.Lens, int(n))
		}
		if err := c.Applies(stored); err != nil {
			return fmt.Errorf("run %s: %w", id, err)
		}
		var b pgx.Batch
		if c.SameLists(stored) {
			b.Queue(`DELETE FROM warden.run_items i USING unnest($2::int[]) WITH ORDINALITY AS l(len, list)
				WHERE i.id = $1 AND i.list = l.list - 1 AND i.n >= l.len`, id, lens)
		} else {
			b.Queue(`DELETE FROM warden.run_items WHERE id = $1`, id)
		}
		b.Queue(`INSERT INTO warden.run_items (id, list, n, doc) SELECT * FROM unnest($1::text[], $2::smallint[], $3::int[], $4::bytea[])
			ON CONFLICT (id, list, n) DO UPDATE SET doc = EXCLUDED.doc`, ids, lists, ns, docs)
		b.Queue(`INSERT INTO warden.runs (id, doc, list_fields, list_lens) VALUES ($1, $2, $3, $4)
			ON CONFLICT (id) DO UPDATE SET doc = EXCLUDED.doc, list_fields = EXCLUDED.list_fields, list_lens = EXCLUDED.list_lens`,
			id, c.Head, c.Fields, lens)
		return tx.SendBatch(ctx, &b).Close()
	})
}

// runRow is a row of warden.runs.
type runRow struct {
	id     string
	doc    []byte
	fields []string
	lens   []int32
}

// whole returns the run's document, reading its parts through q if it is
// kept in parts.
func (s *Store) whole(ctx context.Context, q interface {
	Query(context.Context, string, ...any) (pgx.Rows, error)
}, r runRow) ([]byte, error) {
	if r.fields == nil {
		return r.doc, nil
	}
	rows, err := q.Query(ctx, `SELECT list, n, doc FROM warden.run_items WHERE id = $1 ORDER BY list, n`, r.id)
	if err != nil {
		return nil, err
	}
	lists := make([][][]byte, len(r.fields))
	var list int16
	var n int32
	var doc []byte
	_, err = pgx.ForEachRow(rows, []any{&list, &n, &doc}, func() error {
		if int(list) >= len(lists) || int(n) != len(lists[list]) {
			return s.corruptf("the parts of run %s are malformed (list %d, element %d)", r.id, list, n)
		}
		lists[list] = append(lists[list], doc)
		doc = nil
		return nil
	})
	if err != nil {
		return nil, err
	}
	for i, l := range lists {
		if i >= len(r.lens) || len(l) != int(r.lens[i]) {
			return nil, s.corruptf("run %s: list %q does not hold its %d elements", r.id, r.fields[i], len(l))
		}
	}
	out, err := runpatch.Assemble(r.doc, r.fields, lists)
	if err != nil {
		return nil, s.corruptf("run %s: %v", r.id, err)
	}
	return out, nil
}

// Run returns the document of run id, or an error wrapping ErrNotFound.
func (s *Store) Run(ctx context.Context, id string) (json.RawMessage, error) {
	if err := store.ValidName("run", id); err != nil {
		return nil, err
	}
	var doc []byte
	err := s.inTx(ctx, "reading a run", readOnly, func(ctx context.Context, tx pgx.Tx) error {
		r := runRow{id: id}
		err := tx.QueryRow(ctx, `SELECT doc, list_fields, list_lens FROM warden.runs WHERE id = $1`, id).Scan(&r.doc, &r.fields, &r.lens)
		if errors.Is(err, pgx.ErrNoRows) {
			return fmt.Errorf("run %s: %w", id, store.ErrNotFound)
		}
		if err != nil {
			return err
		}
		doc, err = s.whole(ctx, tx, r)
		return err
	})
	return doc, err
}

// UpdateRun replaces run id's document by what fn makes of it, in one
// transaction holding the run's row: a compare-and-set (a run marked
// interrupted only if it is still running). fn's error aborts the change
// and is returned; fn may be called again if the transaction is retried.
// The new document is stored whole.
func (s *Store) UpdateRun(ctx context.Context, id string, fn func(doc json.RawMessage) (json.RawMessage, error)) error {
	if err := store.ValidName("run", id); err != nil {
		return err
	}
	return s.inTx(ctx, "updating a run", pgx.TxOptions{}, func(ctx context.Context, tx pgx.Tx) error {
		r := runRow{id: id}
		err := tx.QueryRow(ctx, `SELECT doc, list_fields, list_lens FROM warden.runs WHERE id = $1 FOR UPDATE`, id).Scan(&r.doc, &r.fields, &r.lens)
		if errors.Is(err, pgx.ErrNoRows) {
			return fmt.Errorf("run %s: %w", id, store.ErrNotFound)
		}
		if err != nil {
			return err
		}
		doc, err := s.whole(ctx, tx, r)
		if err != nil {
			return err
		}
		nd, err := fn(doc)
		if err != nil {
			return err
		}
		v, err := store.CompactDoc("run "+id, nd)
		if err != nil {
			return err
		}
		_, err = tx.Exec(ctx, putWhole, id, v)
		return err
	})
}

// ListRuns returns run documents newest (largest id) first, at most limit
// of them (<= 0: all).
func (s *Store) ListRuns(ctx context.Context, limit int) ([]json.RawMessage, error) {
	var out []json.RawMessage
	err := s.inTx(ctx, "listing runs", readOnly, func(ctx context.Context, tx pgx.Tx) error {
		lim := any(nil)
		if limit > 0 {
			lim = limit
		}
		rows, err := tx.Query(ctx, `SELECT id, doc, list_fields, list_lens FROM warden.runs ORDER BY id DESC LIMIT $1`, lim)
		if err != nil {
			return err
		}
		runs, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (runRow, error) {
			var rr runRow
			err := r.Scan(&rr.id, &rr.doc, &rr.fields, &rr.lens)
			return rr, err
		})
		if err != nil {
			return err
		}
		out = out[:0]
		for _, r := range runs {
			doc, err := s.whole(ctx, tx, r)
			if err != nil {
				return err
			}
			out = append(out, doc)
		}
		return nil
	})
	return out, err
}
