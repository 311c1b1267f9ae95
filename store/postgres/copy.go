package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/wardenrt/warden/store"
)

// ImportAudit appends records made elsewhere (another store's log)
// verbatim — their sequence numbers, times, links and hashes — after the
// current head, in one transaction. Each record must verify and extend the
// chain: the first links to the head, each to the one before.
func (s *Store) ImportAudit(ctx context.Context, recs []store.AuditRecord) error {
	if len(recs) == 0 {
		return nil
	}
	n := len(recs)
	seqs, tss, prevs, hashes, events := make([]int64, n), make([]string, n), make([]string, n), make([]string, n), make([][]byte, n)
	for i, r := range recs {
		ts := store.FormatRecordTime(r.Time)
		ev, err := store.CompactEvent(r.Event)
		if err != nil {
			return err
		}
		if _, hash := store.EncodeRecord(r.Seq, ts, r.Prev, ev); hash != r.Hash {
			return fmt.Errorf("%w: record %d does not match its hash", store.ErrTampered, r.Seq)
		}
		if i > 0 && (r.Seq != recs[i-1].Seq+1 || r.Prev != recs[i-1].Hash) {
			return fmt.Errorf("%w: record %d does not follow record %d", store.ErrTampered, r.Seq, recs[i-1].Seq)
		}
		seqs[i], tss[i], prevs[i], hashes[i], events[i] = int64(r.Seq), ts, r.Prev, r.Hash, ev
	}
	head := store.Anchor{Seq: recs[n-1].Seq, Hash: recs[n-1].Hash}
	if err := s.appendBlocked(); err != nil {
		return err
	}
	err := s.inTx(ctx, "importing audit records", pgx.TxOptions{}, func(ctx context.Context, tx pgx.Tx) error {
		var last int64
		var lastHash string
		if err := tx.QueryRow(ctx, `SELECT seq, hash FROM warden.audit_head FOR UPDATE`).Scan(&last, &lastHash); err != nil {
			return err
		}
		if recs[0].Seq != uint64(last)+1 || recs[0].Prev != lastHash {
			return fmt.Errorf("%w: record %d does not extend this log, whose head is record %d", store.ErrInvalid, recs[0].Seq, last)
		}
		if _, err := tx.Exec(ctx, `INSERT INTO warden.audit (seq, ts, prev_hash, hash, event)
			SELECT * FROM unnest($1::bigint[], $2::text[], $3::text[], $4::text[], $5::bytea[])`, seqs, tss, prevs, hashes, events); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, `UPDATE warden.audit_head SET seq = $1, hash = $2`, int64(head.Seq), head.Hash)
		return err
	})
	if err != nil {
		return err
	}
	s.lastCommitted.Store(head.Seq)
	s.anchors.queue(s, head)
	return nil
}

// ImportMemory upserts entries keeping their times, in one transaction.
func (s *Store) ImportMemory(ctx context.Context, entries []store.MemoryEntry) error {
	return s.putMemoryBatch(ctx, entries)
}

// PutJob creates or replaces job id (a copy; the scheduler uses CreateJob
// and UpdateJob).
func (s *Store) PutJob(ctx context.Context, id string, doc json.RawMessage) error {
	return s.putDoc(ctx, jobsTable, id, doc)
}

// CopyReport says what CopyFrom copied.
type CopyReport struct {
	AuditRecords  uint64 `json:"audit_records"`
	AuditHeadSeq  uint64 `json:"audit_head_seq"`
	AuditHeadHash string `json:"audit_head_hash"`
	Memory        int    `json:"memory_entries"`
	Runs          int    `json:"runs"`
	Artifacts     int    `json:"artifacts"`
	Pins          int    `json:"pins"`
	Grants        int    `json:"grants"`
	Trust         int    `json:"trust"`
	Jobs          int    `json:"jobs"`
}

// copyBatch is how many records or entries one transaction of a copy
// writes.
const copyBatch = 2000

// CopyFrom copies everything src holds into s: the audit log verbatim
// (src's log must verify, anchor included, and s's must be empty), memory
// entries with their times, runs, artifacts, pins, grants, trust records
// and jobs. It then verifies s's log and checks that its head is src's.
// progress, if set, is told what is being copied.
func (s *Store) CopyFrom(ctx context.Context, src *store.Store, progress func(what string, n int)) (CopyReport, error) {
	var rep CopyReport
	say := func(what string, n int) {
		if progress != nil {
			progress(what, n)
		}
	}
	srcRep, err := src.VerifyAudit(ctx)
	if err != nil {
		return rep, fmt.Errorf("the source's audit log does not verify, so it is not copied: %w", err)
	}
	st, err := s.Stats(ctx)
	if err != nil {
		return rep, err
	}
	if st.AuditHeadSeq != 0 {
		return rep, fmt.Errorf("%w: the destination's audit log already holds %d records; copy into a store whose log is empty (a new database, `warden store migrate`)", store.ErrInvalid, st.AuditHeadSeq)
	}
	for after := uint64(0); after < srcRep.HeadSeq; {
		recs, err := src.ListAudit(ctx, store.AuditFilter{AfterSeq: after, Limit: copyBatch})
		if err != nil {
			return rep, err
		}
		if len(recs) == 0 {
			break
		}
		if err := s.ImportAudit(ctx, recs); err != nil {
			return rep, err
		}
		after = recs[len(recs)-1].Seq
		rep.AuditRecords += uint64(len(recs))
		say("audit records", int(rep.AuditRecords))
	}
	entries, err := src.ListMemory(ctx, "", 0)
	if err != nil {
		return rep, err
	}
	for i := 0; i < len(entries); i += copyBatch {
		if err := s.ImportMemory(ctx, entries[i:min(len(entries), i+copyBatch)]); err != nil {
			return rep, err
		}
		rep.Memory = min(len(entries), i+copyBatch)
		say("memory entries", rep.Memory)
	}
	ids, err := src.RunIDs(ctx)
	if err != nil {
		return rep, err
	}
	for _, id := range ids {
		doc, err := src.Run(ctx, id)
		if err == nil {
			err = s.PutRun(ctx, id, doc)
		}
		if err != nil {
			return rep, err
		}
		rep.Runs++
	}
	say("runs", rep.Runs)
	digests, err := src.ArtifactDigests(ctx)
	if err != nil {
		return rep, err
	}
	for _, d := range digests {
		data, err := src.Artifact(ctx, d)
		if err != nil {
			return rep, err
		}
		if got, err := s.PutArtifact(ctx, data); err != nil {
			return rep, err
		} else if got != d {
			return rep, fmt.Errorf("artifact %s copied as %s", d, got)
		}
		rep.Artifacts++
	}
	say("artifacts", rep.Artifacts)
	docs := []struct {
		what string
		list func(context.Context) (map[string]json.RawMessage, error)
		put  func(context.Context, string, json.RawMessage) error
		n    *int
	}{
		{"pins", src.ListPins, s.PutPin, &rep.Pins},
		{"grants", src.ListGrants, s.PutGrant, &rep.Grants},
		{"trust records", src.ListTrust, s.PutTrust, &rep.Trust},
		{"jobs", src.ListJobs, s.PutJob, &rep.Jobs},
	}
	for _, d := range docs {
		m, err := d.list(ctx)
		if err != nil {
			return rep, err
		}
		for name, doc := range m {
			if err := d.put(ctx, name, doc); err != nil {
				return rep, err
			}
			*d.n++
		}
		say(d.what, *d.n)
	}
	got, err := s.VerifyAudit(ctx)
	if err != nil {
		return rep, fmt.Errorf("the copy's audit log does not verify: %w", err)
	}
	if got.HeadSeq != srcRep.HeadSeq || got.HeadHash != srcRep.HeadHash {
		return rep, errors.New("the copy's audit head differs from the source's")
	}
	rep.AuditHeadSeq, rep.AuditHeadHash = got.HeadSeq, got.HeadHash
	return rep, nil
}
