package postgres

import (
	"cmp"
	"context"
	"math"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"

	"github.com/wardenrt/warden/store"
)

// ListAudit returns the records matching f, in sequence order, as the
// bbolt store does. A filter on the run or the tool reads the expression
// indexes of migration 4: the records whose field has the value sought,
// and those whose event the database could not read as warden does (the
// field ”); warden keeps those that match.
func (s *Store) ListAudit(ctx context.Context, f store.AuditFilter) ([]store.AuditRecord, error) {
	if f.RunID == "" && f.Tool == "" && !f.Newest {
		var out []store.AuditRecord
		err := s.scanAudit(ctx, f.AfterSeq, func(seq uint64, ts, prev, hash string, event []byte) (bool, error) {
			rec, err := toRecord(seq, ts, prev, hash, event)
			if err != nil {
				return false, s.corruptf("audit record %d is malformed (%v)", seq, err)
			}
			out = append(out, rec)
			return f.Limit <= 0 || len(out) < f.Limit, nil
		})
		return out, err
	}
	if f.AfterSeq >= math.MaxInt64 {
		return nil, ctx.Err()
	}
	l := auditLister{s: s, f: f, lo: int64(f.AfterSeq), hi: math.MaxInt64}
	for {
		more, err := l.chunk(ctx)
		if err != nil {
			return nil, err
		}
		if !more || (f.Limit > 0 && len(l.out) >= f.Limit) {
			break
		}
	}
	if f.Newest {
		slices.Reverse(l.out)
	}
	return l.out, nil
}

// listChunk is how many candidates one query of a filtered listing reads.
const listChunk = 512

// auditLister reads a listing in chunks: the records in (lo, hi), from the
// lo end (from the hi end if f.Newest).
type auditLister struct {
	s      *Store
	f      store.AuditFilter
	lo, hi int64
	out    []store.AuditRecord
}

type candidate struct {
	branch         int
	seq            int64
	ts, prev, hash string
	event          []byte
}

// chunk reads the next candidates and reports whether there may be more.
func (l *auditLister) chunk(ctx context.Context) (bool, error) {
	where, order := "seq > $1 AND seq < $2", "ASC"
	if l.f.Newest {
		order = "DESC"
	}
	var query string
	var args []any
	if l.f.RunID == "" && l.f.Tool == "" {
		query = `SELECT 0, seq, ts, prev_hash, hash, event FROM warden.audit WHERE ` + where + ` ORDER BY seq ` + order + ` LIMIT $3`
		args = []any{l.lo, l.hi, listChunk}
	} else {
		// The field's name is one of two constants: written out, so the
		// expression is the index's.
		field, value := "'tool'", l.f.Tool
		if l.f.RunID != "" {
			field, value = "'run_id'", l.f.RunID
		}
		branch := func(n, v string) string {
			return `(SELECT ` + n + `, seq, ts, prev_hash, hash, event FROM warden.audit
				WHERE warden.audit_field(event, ` + field + `) = ` + v + ` AND ` + where + ` ORDER BY seq ` + order + ` LIMIT $3)`
		}
		query = branch("0", "$4") + " UNION ALL " + branch("1", "''")
		var v any = value
		if strings.IndexByte(value, 0) >= 0 || !utf8.ValidString(value) {
			// Not a text PostgreSQL holds: no event reads as it, short of
			// those in the '' branch.
			v = nil
		}
		args = []any{l.lo, l.hi, listChunk, v}
	}
	var cands []candidate
	err := l.s.do(ctx, "reading the audit log", func(ctx context.Context) error {
		rows, err := l.s.pool.Query(ctx, query, args...)
		if err != nil {
			return err
		}
		var c candidate
		cands = cands[:0]
		_, err = pgx.ForEachRow(rows, []any{&c.branch, &c.seq, &c.ts, &c.prev, &c.hash, &c.event}, func() error {
			cands = append(cands, c)
			c.event = nil
			return nil
		})
		return err
	})
	if err != nil {
		return false, err
	}
	return l.take(cands)
}

// take keeps the matching candidates of one chunk, in order, up to where
// both branches are known complete, and moves the bound past them.
func (l *auditLister) take(cands []candidate) (bool, error) {
	// A branch that returned a full chunk may have more past its last
	// row: only the candidates before that point are complete.
	var count [2]int
	var last [2]int64
	for _, c := range cands {
		count[c.branch]++
		last[c.branch] = c.seq
	}
	cut, more := int64(0), false
	for b := range 2 {
		if count[b] == listChunk && (!more || l.f.Newest && last[b] > cut || !l.f.Newest && last[b] < cut) {
			cut, more = last[b], true
		}
	}
	slices.SortFunc(cands, func(a, b candidate) int {
		if l.f.Newest {
			return cmp.Compare(b.seq, a.seq)
		}
		return cmp.Compare(a.seq, b.seq)
	})
	for _, c := range cands {
		if more && (l.f.Newest && c.seq < cut || !l.f.Newest && c.seq > cut) {
			break
		}
		if !store.EventMatches(c.event, l.f.RunID, l.f.Tool) {
			continue
		}
		rec, err := toRecord(uint64(c.seq), c.ts, c.prev, c.hash, c.event)
		if err != nil {
			return false, l.s.corruptf("audit record %d is malformed (%v)", c.seq, err)
		}
		l.out = append(l.out, rec)
		if l.f.Limit > 0 && len(l.out) >= l.f.Limit {
			return false, nil
		}
	}
	if more {
		if l.f.Newest {
			l.hi = cut
		} else {
			l.lo = cut
		}
	}
	return more, nil
}
