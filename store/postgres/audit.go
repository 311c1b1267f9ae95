package postgres

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/wardenrt/warden/store"
)

// auditChunk is how many records one query of a scan reads.
const auditChunk = 4096

// auditQueue is the group-commit queue of AppendAudit: one committer
// goroutine per Store takes everything queued while the previous commit
// was in flight and commits it in one transaction.
type auditQueue struct {
	mu         sync.Mutex
	queue      []*appendReq
	committing bool
	closed     bool
	committer  sync.WaitGroup
}

type appendReq struct {
	event []byte
	taken bool // by the committer; guarded by auditQueue.mu
	seq   uint64
	err   error
	done  chan struct{}
}

// AppendAudit durably records one event (a JSON object) and returns its
// sequence number. It returns once the transaction holding the record has
// committed (durable as the server's synchronous_commit makes it).
// Appends from every process on every host serialise on the chain's head
// row, so the log stays one gapless chain; concurrent calls in this process
// are committed together. If ctx ends before the record is taken into a
// transaction it is not written and ctx.Err() is returned.
func (s *Store) AppendAudit(ctx context.Context, event json.RawMessage) (uint64, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	ev, err := store.CompactEvent(event)
	if err != nil {
		return 0, err
	}
	req := &appendReq{event: ev, done: make(chan struct{})}
	q := &s.audit
	q.mu.Lock()
	if q.closed {
		q.mu.Unlock()
		return 0, store.ErrClosed
	}
	q.queue = append(q.queue, req)
	if !q.committing {
		q.committing = true
		q.committer.Add(1)
		go s.commitLoop()
	}
	q.mu.Unlock()
	select {
	case <-req.done:
		return req.seq, req.err
	case <-ctx.Done():
	}
	q.mu.Lock()
	if !req.taken {
		for i, r := range q.queue {
			if r == req {
				q.queue = append(q.queue[:i], q.queue[i+1:]...)
				break
			}
		}
		q.mu.Unlock()
		return 0, ctx.Err()
	}
	q.mu.Unlock()
	<-req.done
	return req.seq, req.err
}

func (s *Store) commitLoop() {
	q := &s.audit
	defer q.committer.Done()
	for {
		q.mu.Lock()
		batch := q.queue
		q.queue = nil
		if len(batch) == 0 {
			q.committing = false
			q.mu.Unlock()
			return
		}
		for _, r := range batch {
			r.taken = true
		}
		q.mu.Unlock()
		err := s.commitBatch(batch)
		for _, r := range batch {
			if err != nil {
				r.seq = 0
			}
			r.err = err
			close(r.done)
		}
	}
}

// commitBatch appends batch in one transaction: lock the head row, insert
// the records after it, move it, commit — two round trips. A commit whose
// outcome is unknown (the connection broke while committing) is looked up
// before anything is retried, so a record is never written twice.
func (s *Store) commitBatch(batch []*appendReq) error {
	if err := s.appendBlocked(); err != nil {
		return err
	}
	if err := s.anchors.recover(s); err != nil {
		return err
	}
	ctx, cancel := s.opCtx(context.Background())
	defer cancel()
	var head store.Anchor
	err := s.retry(ctx, func(ctx context.Context) error {
		var err error
		head, err = s.tryCommit(ctx, batch)
		return err
	})
	if err != nil {
		return s.wrap(ctx, "appending to the audit log", err)
	}
	s.lastCommitted.Store(head.Seq)
	s.anchors.queue(s, head)
	return nil
}

// errCommitUnknown marks a commit whose outcome could not be learnt.
var errCommitUnknown = errors.New("the commit's outcome is unknown")

func (s *Store) tryCommit(ctx context.Context, batch []*appendReq) (store.Anchor, error) {
	conn, err := s.pool.Acquire(ctx)
	if err != nil {
		return store.Anchor{}, err
	}
	defer conn.Release()
	var b pgx.Batch
	b.Queue(`BEGIN`)
	b.Queue(`SELECT seq, hash, clock_timestamp() FROM warden.audit_head FOR UPDATE`)
	br := conn.SendBatch(ctx, &b)
	var last int64
	var lastHash string
	var dbNow time.Time
	_, err = br.Exec()
	if err == nil {
		err = br.QueryRow().Scan(&last, &lastHash, &dbNow)
	}
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		abort(conn.Conn())
		return store.Anchor{}, err
	}
	now := dbNow
	if s.now != nil {
		now = s.now()
	}
	ts := store.FormatRecordTime(now)
	n := len(batch)
	seqs, tss, prevs, hashes, events := make([]int64, n), make([]string, n), make([]string, n), make([]string, n), make([][]byte, n)
	prev := lastHash
	for i, r := range batch {
		seq := last + 1 + int64(i)
		_, hash := store.EncodeRecord(uint64(seq), ts, prev, r.event)
		seqs[i], tss[i], prevs[i], hashes[i], events[i] = seq, ts, prev, hash, r.event
		prev = hash
	}
	head := store.Anchor{Seq: uint64(seqs[n-1]), Hash: hashes[n-1]}
	b = pgx.Batch{}
	b.Queue(`INSERT INTO warden.audit (seq, ts, prev_hash, hash, event)
		SELECT * FROM unnest($1::bigint[], $2::text[], $3::text[], $4::text[], $5::bytea[])`, seqs, tss, prevs, hashes, events)
	b.Queue(`UPDATE warden.audit_head SET seq = $1, hash = $2`, int64(head.Seq), head.Hash)
	b.Queue(`COMMIT`)
	br = conn.SendBatch(ctx, &b)
	_, err = br.Exec()
	if err == nil {
		_, err = br.Exec()
	}
	inserted := err == nil
	if err == nil {
		_, err = br.Exec()
	}
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		for i, r := range batch {
			r.seq = uint64(seqs[i])
		}
		return head, nil
	}
	abort(conn.Conn())
	if !inserted {
		return store.Anchor{}, err
	}
	// The COMMIT was sent: did it happen? The first record's hash covers
	// the previous head and the time, so finding it means this batch.
	var got string
	lerr := s.pool.QueryRow(ctx, `SELECT hash FROM warden.audit WHERE seq = $1`, seqs[0]).Scan(&got)
	switch {
	case lerr == nil && got == hashes[0]:
		for i, r := range batch {
			r.seq = uint64(seqs[i])
		}
		return head, nil
	case errors.Is(lerr, pgx.ErrNoRows) || lerr == nil:
		return store.Anchor{}, err // not committed: safe to retry if transient
	}
	return store.Anchor{}, fmt.Errorf("%w (%v; looking it up: %v)", errCommitUnknown, err, lerr)
}

// abort ends a failed transaction on conn, closing the connection if even
// that fails (the pool then drops it).
func abort(conn *pgx.Conn) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := conn.Exec(ctx, `ROLLBACK`); err != nil {
		conn.Close(ctx)
	}
}

func (s *Store) appendBlocked() error {
	s.blockMu.Lock()
	defer s.blockMu.Unlock()
	return s.blocked
}

func (s *Store) setAppendBlocked(err error) {
	s.blockMu.Lock()
	s.blocked = err
	s.blockMu.Unlock()
}

// The anchor: this host keeps the head it last committed in a file of its
// own (outside the database), and a copy in warden.audit_anchors so that
// `audit verify` on any host checks every host's. The file is written
// after the commit, in the background, newest head only, never moving
// back (the lock file serialises the processes of this host).

type anchorWriter struct {
	mu      sync.Mutex
	idle    sync.Cond
	pending *store.Anchor
	running bool
	failed  *store.Anchor
	err     error
	written uint64
}

func (w *anchorWriter) queue(s *Store, head store.Anchor) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.pending = &head
	if w.running {
		return
	}
	w.running = true
	go w.loop(s)
}

func (w *anchorWriter) loop(s *Store) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for w.pending != nil {
		a := *w.pending
		w.pending = nil
		w.mu.Unlock()
		err := s.writeAnchor(a, false)
		w.mu.Lock()
		if err != nil {
			w.failed, w.err = &a, err
		} else {
			w.failed, w.err = nil, nil
			w.written = max(w.written, a.Seq)
		}
		w.idle.Broadcast()
	}
	w.running = false
	w.idle.Broadcast()
}

func (w *anchorWriter) waitFor(seq uint64) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for w.running && w.written < seq {
		w.idle.Wait()
	}
}

func (w *anchorWriter) wait() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	for w.running {
		w.idle.Wait()
	}
	return w.err
}

// recover retries a failed anchor write; while the anchor cannot be
// written, nothing more is appended.
func (w *anchorWriter) recover(s *Store) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.failed == nil {
		return nil
	}
	for w.running {
		w.idle.Wait()
	}
	if w.failed == nil {
		return nil
	}
	if err := s.writeAnchor(*w.failed, false); err != nil {
		w.err = err
		return fmt.Errorf("postgres: the audit anchor %s cannot be written, so no more records are appended: %w", s.anchorPath, err)
	}
	w.failed, w.err = nil, nil
	return nil
}

// writeAnchor moves this host's anchor (file, then row) to a, unless it
// already names a later record (force: set both to a whatever they name).
func (s *Store) writeAnchor(a store.Anchor, force bool) error {
	unlock, err := lockFile(s.anchorPath + ".lock")
	if err != nil {
		return err
	}
	defer unlock()
	if !force {
		if cur, found, ok, err := store.ReadAnchor(s.anchorPath); err == nil && found && ok && cur.Seq >= a.Seq {
			return nil
		}
	}
	if err := store.WriteAnchor(s.anchorPath, a); err != nil {
		return err
	}
	ctx, cancel := s.opCtx(context.Background())
	defer cancel()
	cond := `WHERE warden.audit_anchors.seq < EXCLUDED.seq`
	if force {
		cond = ""
	}
	_, err = s.pool.Exec(ctx, `INSERT INTO warden.audit_anchors (host, seq, hash) VALUES ($1, $2, $3)
		ON CONFLICT (host) DO UPDATE SET seq = EXCLUDED.seq, hash = EXCLUDED.hash, updated = clock_timestamp() `+cond,
		s.host, int64(a.Seq), a.Hash)
	// The row is a copy for other hosts to check; the file is the
	// anchor. A row that could not be written lags, which verifies.
	_ = err
	return nil
}

// checkAnchorOnOpen compares this host's anchor with the log. A home that
// has no anchor file for this store anchors the head now (from here on it
// vouches for what it has seen), once the row of its host name, if any,
// has been checked. An anchor (file or row) ahead of the log, or naming a
// record with another hash, blocks appends (ErrTampered) until Reanchor.
func (s *Store) checkAnchorOnOpen(ctx context.Context) error {
	a, found, ok, err := store.ReadAnchor(s.anchorPath)
	if err != nil {
		return err
	}
	var head store.Anchor
	var rowSeq int64
	var rowHash string
	var hasRow bool
	err = s.retry(ctx, func(ctx context.Context) error {
		var seq int64
		if err := s.pool.QueryRow(ctx, `SELECT seq, hash FROM warden.audit_head`).Scan(&seq, &head.Hash); err != nil {
			return err
		}
		head.Seq = uint64(seq)
		err := s.pool.QueryRow(ctx, `SELECT seq, hash FROM warden.audit_anchors WHERE host = $1`, s.host).Scan(&rowSeq, &rowHash)
		hasRow = err == nil
		if errors.Is(err, pgx.ErrNoRows) {
			err = nil
		}
		return err
	})
	if err != nil {
		return err
	}
	switch {
	case !found && hasRow:
		// This home has not anchored this store (or its file is gone):
		// the row, the last anchor of this host name, must still hold.
		what := fmt.Sprintf("the anchor of host %s (its anchor file %s is missing)", s.host, s.anchorPath)
		if firstBad, reason, err := s.checkOneAnchor(ctx, what, store.Anchor{Seq: uint64(rowSeq), Hash: rowHash}, head.Seq); err != nil {
			return err
		} else if firstBad != 0 {
			s.setAppendBlocked(fmt.Errorf("%w: refusing to append to the audit log: %s", store.ErrTampered, reason))
			return nil
		}
		return s.writeAnchor(head, false)
	case !found:
		return s.writeAnchor(head, false)
	case !ok:
		s.setAppendBlocked(fmt.Errorf("%w: refusing to append to the audit log: the audit anchor %s is garbled", store.ErrTampered, s.anchorPath))
		return nil
	}
	if firstBad, reason, err := s.checkOneAnchor(ctx, "this host's anchor "+s.anchorPath, a, head.Seq); err != nil {
		return err
	} else if firstBad != 0 {
		s.setAppendBlocked(fmt.Errorf("%w: refusing to append to the audit log: %s", store.ErrTampered, reason))
	}
	return nil
}

// checkOneAnchor checks that anchor a names a record of a log whose
// verified head is headSeq, with a's hash.
func (s *Store) checkOneAnchor(ctx context.Context, what string, a store.Anchor, headSeq uint64) (uint64, string, error) {
	if a.Seq == 0 {
		return 0, "", nil
	}
	if a.Seq > headSeq {
		return headSeq + 1, fmt.Sprintf("%s names record %d but the log ends at record %d: records were removed from the tail, or the database was rolled back to an older copy", what, a.Seq, headSeq), nil
	}
	var hash string
	err := s.pool.QueryRow(ctx, `SELECT hash FROM warden.audit WHERE seq = $1`, int64(a.Seq)).Scan(&hash)
	if errors.Is(err, pgx.ErrNoRows) {
		return a.Seq, fmt.Sprintf("%s names record %d, which is missing", what, a.Seq), nil
	}
	if err != nil {
		return 0, "", err
	}
	if hash != a.Hash {
		return a.Seq, fmt.Sprintf("record %d is not the record %s names (its hash differs): the log was rewritten", a.Seq, what), nil
	}
	return 0, "", nil
}

// scanAudit calls visit for each record from seq after+1 on, in order, in
// queries of auditChunk records (each bounded by the timeout); visit
// returns false to stop.
func (s *Store) scanAudit(ctx context.Context, after uint64, visit func(seq uint64, ts, prev, hash string, event []byte) (bool, error)) error {
	if s.isClosed() {
		return store.ErrClosed
	}
	for {
		if after >= math.MaxInt64 {
			return nil
		}
		n := 0
		more := true
		err := s.do(ctx, "reading the audit log", func(ctx context.Context) error {
			n = 0
			rows, err := s.pool.Query(ctx, `SELECT seq, ts, prev_hash, hash, event FROM warden.audit WHERE seq > $1 ORDER BY seq LIMIT $2`, int64(after), auditChunk)
			if err != nil {
				return err
			}
			defer rows.Close()
			var seq int64
			var ts, prev, hash string
			var event []byte
			next := after
			for rows.Next() {
				if err := rows.Scan(&seq, &ts, &prev, &hash, &event); err != nil {
					return err
				}
				n++
				next = uint64(seq)
				ok, err := visit(uint64(seq), ts, prev, hash, event)
				if err != nil {
					return err
				}
				if !ok {
					more = false
					break
				}
			}
			if err := rows.Err(); err != nil {
				return err
			}
			after = next
			return nil
		})
		if err != nil || !more || n < auditChunk {
			return err
		}
	}
}

func toRecord(seq uint64, ts, prev, hash string, event []byte) (store.AuditRecord, error) {
	t, err := time.Parse(time.RFC3339Nano, ts)
	if err != nil {
		return store.AuditRecord{}, err
	}
	return store.AuditRecord{Seq: seq, Time: t, Prev: prev, Hash: hash, Event: bytes.Clone(event)}, nil
}

// AuditRecord returns the record with sequence number seq, or an error
// wrapping store.ErrNotFound.
func (s *Store) AuditRecord(ctx context.Context, seq uint64) (store.AuditRecord, error) {
	var rec store.AuditRecord
	if seq == 0 || seq > math.MaxInt64 {
		return rec, fmt.Errorf("audit record %d: %w", seq, store.ErrNotFound)
	}
	err := s.do(ctx, "reading the audit log", func(ctx context.Context) error {
		var ts, prev, hash string
		var event []byte
		err := s.pool.QueryRow(ctx, `SELECT ts, prev_hash, hash, event FROM warden.audit WHERE seq = $1`, int64(seq)).Scan(&ts, &prev, &hash, &event)
		if errors.Is(err, pgx.ErrNoRows) {
			return fmt.Errorf("audit record %d: %w", seq, store.ErrNotFound)
		}
		if err != nil {
			return err
		}
		rec, err = toRecord(seq, ts, prev, hash, event)
		if err != nil {
			return s.corruptf("audit record %d is malformed (%v)", seq, err)
		}
		return nil
	})
	return rec, err
}

// ExportAudit writes the whole log to w as JSON Lines, each line a record
// in its canonical form (what its hash covers), as the bbolt store
// exports it.
func (s *Store) ExportAudit(ctx context.Context, w io.Writer) error {
	var buf bytes.Buffer
	var werr error
	err := s.scanAudit(ctx, 0, func(seq uint64, ts, prev, hash string, event []byte) (bool, error) {
		line, _ := store.EncodeRecord(seq, ts, prev, event)
		buf.Write(line)
		buf.WriteByte('\n')
		if buf.Len() >= 1<<20 {
			if _, werr = w.Write(buf.Bytes()); werr != nil {
				return false, werr
			}
			buf.Reset()
		}
		return true, nil
	})
	if err != nil {
		return err
	}
	_, err = w.Write(buf.Bytes())
	return err
}

// HostAnchor is one host's anchor as the database holds it.
type HostAnchor struct {
	Host    string    `json:"host"`
	Seq     uint64    `json:"seq"`
	Hash    string    `json:"hash"`
	Updated time.Time `json:"updated"`
}

// HostAnchors returns every host's anchor row.
func (s *Store) HostAnchors(ctx context.Context) ([]HostAnchor, error) {
	var out []HostAnchor
	err := s.do(ctx, "reading the anchors", func(ctx context.Context) error {
		rows, err := s.pool.Query(ctx, `SELECT host, seq, hash, updated FROM warden.audit_anchors ORDER BY host`)
		if err != nil {
			return err
		}
		out, err = pgx.CollectRows(rows, func(r pgx.CollectableRow) (HostAnchor, error) {
			var a HostAnchor
			var seq int64
			err := r.Scan(&a.Host, &seq, &a.Hash, &a.Updated)
			a.Seq = uint64(seq)
			return a, err
		})
		return err
	})
	return out, err
}

// VerifyAudit checks the whole chain (as the bbolt store does: gapless,
// canonical, every hash and link), then this host's anchor file and every
// host's anchor row: each must name a record of the chain, with its hash.
func (s *Store) VerifyAudit(ctx context.Context) (store.VerifyReport, error) {
	return s.verify(ctx, false)
}

// Reanchor verifies the chain ignoring the anchors and, if it verifies,
// makes this host's anchor (file and row) name its head and lets appends
// through again. Other hosts' rows are theirs to reanchor.
func (s *Store) Reanchor(ctx context.Context) (store.VerifyReport, error) {
	return s.verify(ctx, true)
}

func (s *Store) verify(ctx context.Context, reanchor bool) (store.VerifyReport, error) {
	// Anchors first: each names a committed record, so the scan that
	// follows includes it (records are never changed or removed, short of
	// tampering, which is what this looks for).
	s.anchors.waitFor(s.lastCommitted.Load())
	local, found, ok, err := store.ReadAnchor(s.anchorPath)
	if err != nil {
		return store.VerifyReport{}, err
	}
	hosts, err := s.HostAnchors(ctx)
	if err != nil {
		return store.VerifyReport{}, err
	}
	var cv store.ChainVerifier
	err = s.scanAudit(ctx, 0, func(seq uint64, ts, prev, hash string, event []byte) (bool, error) {
		return cv.Check(seq, ts, prev, hash, event), nil
	})
	rep := cv.Report()
	if err != nil {
		return rep, err
	}
	if rep.FirstBad != 0 {
		return rep, fmt.Errorf("%w: first bad record %d: %s", store.ErrTampered, rep.FirstBad, rep.Reason)
	}
	head := cv.Head()
	if reanchor {
		if err := s.writeAnchor(head, true); err != nil {
			return rep, fmt.Errorf("postgres: writing the audit anchor: %w", err)
		}
		s.setAppendBlocked(nil)
		rep.AnchorSeq = head.Seq
		return rep, nil
	}
	err = s.do(ctx, "checking the anchors", func(ctx context.Context) error {
		check := func(what string, a store.Anchor) (bool, error) {
			firstBad, reason, err := s.checkOneAnchor(ctx, what, a, head.Seq)
			if err != nil || firstBad == 0 {
				return false, err
			}
			rep.FirstBad, rep.Reason = firstBad, reason
			return true, nil
		}
		switch {
		case found && ok:
			rep.AnchorSeq = local.Seq
			if bad, err := check("this host's anchor "+s.anchorPath, local); bad || err != nil {
				return err
			}
		case found:
			rep.FirstBad, rep.Reason = head.Seq+1, fmt.Sprintf("the audit anchor %s is garbled, so records after %d may have been removed", s.anchorPath, head.Seq)
			return nil
		}
		for _, h := range hosts {
			if bad, err := check(fmt.Sprintf("the anchor of host %s", h.Host), store.Anchor{Seq: h.Seq, Hash: h.Hash}); bad || err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return rep, err
	}
	if rep.FirstBad != 0 {
		return rep, fmt.Errorf("%w: first bad record %d: %s", store.ErrTampered, rep.FirstBad, rep.Reason)
	}
	return rep, nil
}
