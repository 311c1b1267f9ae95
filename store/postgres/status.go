package postgres

import (
	"context"
	"time"

	"github.com/wardenrt/warden/store"
)

// Stats counts what the store holds. Path is the store's URL without its
// password; SizeBytes is what the warden schema's tables and indexes take.
func (s *Store) Stats(ctx context.Context) (store.Stats, error) {
	st := store.Stats{Path: s.url}
	err := s.do(ctx, "reading the store's statistics", func(ctx context.Context) error {
		var head, mem, runs, arts int64
		err := s.pool.QueryRow(ctx, `SELECT
				(SELECT seq FROM warden.audit_head),
				(SELECT hash FROM warden.audit_head),
				(SELECT coalesce(sum(docs), 0) FROM warden.memory_stats),
				(SELECT count(*) FROM warden.runs),
				(SELECT count(*) FROM warden.artifacts),
				(SELECT coalesce(sum(pg_total_relation_size(c.oid)), 0)::bigint FROM pg_class c
					JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = 'warden' AND c.relkind = 'r')`).
			Scan(&head, &st.AuditHeadHash, &mem, &runs, &arts, &st.SizeBytes)
		st.AuditHeadSeq, st.AuditRecords = uint64(head), uint64(head)
		st.MemoryEntries, st.Runs, st.Artifacts = int(mem), int(runs), int(arts)
		return err
	})
	return st, err
}

// Status is what `warden store status` shows of a PostgreSQL store.
type Status struct {
	Backend       string       `json:"backend"`
	URL           string       `json:"url"`
	StoreID       string       `json:"store_id"`
	SchemaVersion int          `json:"schema_version"`
	Server        string       `json:"server_version"`
	SizeBytes     int64        `json:"size_bytes"`
	AuditHeadSeq  uint64       `json:"audit_head_seq"`
	Host          string       `json:"host"`
	AnchorPath    string       `json:"anchor_path"`
	AnchorSeq     uint64       `json:"anchor_seq"`
	AnchorLag     uint64       `json:"anchor_lag"` // records committed after this host's anchor
	Hosts         []HostAnchor `json:"hosts"`
	Latency       string       `json:"round_trip"`
}

// Status reports the store's backend, schema and server version, size,
// and how far this host's anchor (and every host's row) lags the head.
func (s *Store) Status(ctx context.Context) (Status, error) {
	st := Status{Backend: "postgres", URL: s.url, StoreID: s.id, Host: s.host, AnchorPath: s.anchorPath, SchemaVersion: SchemaVersion}
	t0 := time.Now()
	err := s.do(ctx, "reading the store's status", func(ctx context.Context) error {
		return s.pool.QueryRow(ctx, `SHOW server_version`).Scan(&st.Server)
	})
	if err != nil {
		return st, err
	}
	st.Latency = time.Since(t0).Round(time.Microsecond).String()
	stats, err := s.Stats(ctx)
	if err != nil {
		return st, err
	}
	st.SizeBytes, st.AuditHeadSeq = stats.SizeBytes, stats.AuditHeadSeq
	s.anchors.waitFor(s.lastCommitted.Load())
	if a, found, ok, err := store.ReadAnchor(s.anchorPath); err == nil && found && ok {
		st.AnchorSeq = a.Seq
	}
	if st.AuditHeadSeq > st.AnchorSeq {
		st.AnchorLag = st.AuditHeadSeq - st.AnchorSeq
	}
	st.Hosts, err = s.HostAnchors(ctx)
	return st, err
}
