package store

import (
	"context"
	"encoding/binary"
	"os"

	bolt "go.etcd.io/bbolt"
)

// Stats describes a store.
type Stats struct {
	Path          string `json:"path"`
	SizeBytes     int64  `json:"size_bytes"`
	AuditRecords  uint64 `json:"audit_records"`
	AuditHeadSeq  uint64 `json:"audit_head_seq"`
	AuditHeadHash string `json:"audit_head_hash"`
	MemoryEntries int    `json:"memory_entries"`
	Runs          int    `json:"runs"`
	Artifacts     int    `json:"artifacts"`
}

// Stats counts what the store holds. It reads every page of the counted
// buckets (not their values), so it is not for hot paths.
func (s *Store) Stats(ctx context.Context) (Stats, error) {
	st := Stats{Path: s.path}
	err := s.view(ctx, func(tx *bolt.Tx) error {
		audit := tx.Bucket(bucketAudit)
		if head, err := auditHead(audit); err == nil {
			st.AuditHeadSeq, st.AuditHeadHash = head.seq, head.hash
		} else if k, _ := audit.Cursor().Last(); len(k) == 8 {
			// An unreadable head record is VerifyAudit's to report;
			// count what is there.
			st.AuditHeadSeq = binary.BigEndian.Uint64(k)
		}
		st.AuditRecords = uint64(audit.Stats().KeyN)
		st.MemoryEntries = tx.Bucket(bucketMemory).Stats().KeyN
		st.Runs = tx.Bucket(bucketRuns).Stats().KeyN
		st.Artifacts = tx.Bucket(bucketArtifacts).Stats().KeyN
		return nil
	})
	if err != nil {
		return st, err
	}
	if fi, err := os.Stat(s.path); err == nil {
		st.SizeBytes = fi.Size()
	}
	return st, nil
}
