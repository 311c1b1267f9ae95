package store

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"slices"

	bolt "go.etcd.io/bbolt"
)

// ListAudit returns the records matching f, in sequence order. A filter on
// the run or the tool reads the audit index (catching it up first if
// records were appended without it), and scans only the records after
// it; every record read through the index is checked against the filter.
func (s *Store) ListAudit(ctx context.Context, f AuditFilter) ([]AuditRecord, error) {
	if f.AfterSeq == ^uint64(0) {
		return nil, ctx.Err()
	}
	l := &auditList{f: f, path: s.path}
	if f.RunID == "" && f.Tool == "" {
		err := s.listScan(ctx, l, f.AfterSeq)
		return l.result(), err
	}
	if err := s.catchUpAuditIndex(ctx); err != nil {
		return nil, err
	}
	var m uint64 // the index is read for records up to m
	err := s.view(ctx, func(tx *bolt.Tx) error {
		if head, err := auditHead(tx.Bucket(bucketAudit)); err == nil {
			m = indexUsable(tx, head.seq)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	kind, value := indexTool, f.Tool
	if f.RunID != "" {
		kind, value = indexRun, f.RunID
	}
	// Records after the index, then the index (newest first), or the other
	// way round.
	parts := []func() error{
		func() error { return s.listIndex(ctx, l, kind, value, f.AfterSeq, m) },
		func() error { return s.listScan(ctx, l, max(m, f.AfterSeq)) },
	}
	if f.Newest {
		slices.Reverse(parts)
	}
	for _, part := range parts {
		if l.full() {
			break
		}
		if err := part(); err != nil {
			return nil, err
		}
	}
	return l.result(), nil
}

// auditList collects the records of a listing.
type auditList struct {
	f    AuditFilter
	path string
	out  []AuditRecord
}

// add keeps the record stored under seq if it matches the filter, and
// reports whether more records are wanted.
func (l *auditList) add(seq uint64, v []byte) (bool, error) {
	raw, err := parseRecord(v)
	if err == nil && raw.seq != seq {
		err = fmt.Errorf("stored under key %d", seq)
	}
	if err != nil {
		return false, corruptf(l.path, "audit record %d is malformed (%v); run \"warden audit verify\"", seq, err)
	}
	if !eventMatches(raw.event, l.f.RunID, l.f.Tool) {
		return true, nil
	}
	rec, err := raw.toRecord()
	if err != nil {
		return false, corruptf(l.path, "audit record %d is malformed (%v); run \"warden audit verify\"", seq, err)
	}
	l.out = append(l.out, rec)
	return !l.full(), nil
}

func (l *auditList) full() bool { return l.f.Limit > 0 && len(l.out) >= l.f.Limit }

// result is the records in sequence order.
func (l *auditList) result() []AuditRecord {
	if l.f.Newest {
		slices.Reverse(l.out)
	}
	return l.out
}

// listScan adds the records after lo, reading every one (Newest: from the
// last one down).
func (s *Store) listScan(ctx context.Context, l *auditList, lo uint64) error {
	var start []byte
	if !l.f.Newest {
		start = seqKey(lo + 1)
	}
	return s.scanAudit(ctx, start, auditScan{reverse: l.f.Newest, visit: func(k, v []byte) (bool, error) {
		if len(k) != 8 {
			return false, corruptf(s.path, "unexpected audit key %x; run \"warden audit verify\"", k)
		}
		seq := binary.BigEndian.Uint64(k)
		if seq <= lo {
			return false, nil // reverse: past the range
		}
		return l.add(seq, v)
	}})
}

// listIndex adds the records in (lo, hi] that the index lists under kind
// and value, in read transactions of auditChunk entries (Newest: from hi
// down).
func (s *Store) listIndex(ctx context.Context, l *auditList, kind byte, value string, lo, hi uint64) error {
	if hi <= lo {
		return nil
	}
	prefix := indexPrefix(kind, value)
	next := lo + 1 // the first entry not yet read
	if l.f.Newest {
		next = hi
	}
	for more := true; more; {
		more = false
		err := s.view(ctx, func(tx *bolt.Tx) error {
			audit := tx.Bucket(bucketAudit)
			c := tx.Bucket(bucketAuditIndex).Cursor()
			from := binary.BigEndian.AppendUint64(bytes.Clone(prefix), next)
			k, _ := c.Seek(from)
			if l.f.Newest && !bytes.Equal(k, from) {
				if k == nil {
					k, _ = c.Last()
				} else {
					k, _ = c.Prev()
				}
			}
			step := c.Next
			if l.f.Newest {
				step = c.Prev
			}
			for n := 0; k != nil && bytes.HasPrefix(k, prefix); k, _ = step() {
				if len(k) != len(prefix)+8 {
					continue // malformed: VerifyAudit reports it
				}
				seq := binary.BigEndian.Uint64(k[len(prefix):])
				if seq <= lo || seq > hi {
					return nil
				}
				if n == auditChunk {
					more, next = true, seq
					return nil
				}
				if n%256 == 0 {
					if err := ctx.Err(); err != nil {
						return err
					}
				}
				n++
				v := audit.Get(seqKey(seq))
				if v == nil {
					return fmt.Errorf("%w: the audit index names record %d, which is missing; run \"warden audit verify\"", ErrTampered, seq)
				}
				if want, err := l.add(seq, v); err != nil || !want {
					return err
				}
			}
			return nil
		})
		if err != nil {
			return err
		}
	}
	return nil
}
