package postgres

import (
	"context"

	"github.com/wardenrt/warden/store"
)

// ListAuditByScan is ListAudit as it was before the indexes of migration 4:
// every record after f.AfterSeq read and tested (the benchmarks' baseline).
func (s *Store) ListAuditByScan(ctx context.Context, f store.AuditFilter) ([]store.AuditRecord, error) {
	var out []store.AuditRecord
	err := s.scanAudit(ctx, f.AfterSeq, func(seq uint64, ts, prev, hash string, event []byte) (bool, error) {
		if !store.EventMatches(event, f.RunID, f.Tool) {
			return true, nil
		}
		rec, err := toRecord(seq, ts, prev, hash, event)
		if err != nil {
			return false, err
		}
		out = append(out, rec)
		return true, nil
	})
	if f.Limit > 0 && len(out) > f.Limit {
		out = out[len(out)-f.Limit:]
	}
	return out, err
}
