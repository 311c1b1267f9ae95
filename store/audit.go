package store

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	bolt "go.etcd.io/bbolt"
)

// AuditRecord is one record of the audit log.
type AuditRecord struct {
	Seq   uint64          `json:"seq"`
	Time  time.Time       `json:"time"`
	Prev  string          `json:"prev"` // hex SHA-256 of the previous record (64 zeros for the first)
	Hash  string          `json:"hash"` // hex SHA-256 of prev, seq, time and event
	Event json.RawMessage `json:"event"`
}

// AuditFilter selects records for ListAudit. Empty fields match everything.
type AuditFilter struct {
	RunID    string // the event's top-level "run_id" string field
	Tool     string // the event's top-level "tool" string field
	AfterSeq uint64 // only records with a larger sequence number
	Limit    int    // at most this many records; <= 0 means no limit
	// Newest makes Limit count back from the newest matching record: the
	// last Limit records that match, still in sequence order.
	Newest bool
}

// VerifyReport is the result of VerifyAudit. Records, HeadSeq and HeadHash
// describe the prefix of the log that verified.
type VerifyReport struct {
	Records   uint64 `json:"records"`
	HeadSeq   uint64 `json:"head_seq"`
	HeadHash  string `json:"head_hash"`
	AnchorSeq uint64 `json:"anchor_seq"`
	FirstBad  uint64 `json:"first_bad"` // 0 if the log verified
	Reason    string `json:"reason,omitempty"`
}

// zeroHash is the prev of the first record and the hash of the genesis anchor.
const zeroHash = "0000000000000000000000000000000000000000000000000000000000000000"

// auditChunk is how many records one read transaction of a scan covers, so
// long scans let other processes in between chunks.
const auditChunk = 4096

// auditQueue is the group-commit queue of AppendAudit.
type auditQueue struct {
	mu         sync.Mutex
	queue      []*appendReq
	committing bool   // a committer goroutine is running
	cancelWait func() // ends the committer's wait for the file
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

// AppendAudit durably records one event (a JSON object, already redacted by
// the caller) and returns its sequence number (1-based, gapless). It returns
// only after the bbolt transaction holding the record has been committed and
// fsynced. Concurrent calls are committed together.
//
// The event is stored compacted. The anchor is moved to the new head in the
// background, overlapping the next commit; if that write fails, the record
// stands (the anchor lags, which verifies), later appends fail until the
// anchor can be written again, and Close reports the error. If the log
// disagrees with its anchor, nothing is written and the error wraps
// ErrTampered. If ctx ends before the record is taken
// into a transaction (in particular while another process holds the file),
// it is not written and ctx.Err() is returned; once taken, AppendAudit
// waits for the commit, which no longer waits for anyone.
func (s *Store) AppendAudit(ctx context.Context, event json.RawMessage) (uint64, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	ev, err := compactObject(event)
	if err != nil {
		return 0, fmt.Errorf("store: audit event: %w", err)
	}
	req := &appendReq{event: ev, done: make(chan struct{})}
	q := &s.audit
	q.mu.Lock()
	if q.closed {
		q.mu.Unlock()
		return 0, ErrClosed
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
		if len(q.queue) == 0 && q.cancelWait != nil {
			q.cancelWait()
		}
		q.mu.Unlock()
		return 0, ctx.Err()
	}
	q.mu.Unlock()
	<-req.done
	return req.seq, req.err
}

// compactObject checks that event is one JSON object and compacts it.
func compactObject(event []byte) ([]byte, error) {
	var buf bytes.Buffer
	if err := json.Compact(&buf, event); err != nil {
		return nil, fmt.Errorf("%w: not valid JSON: %v", ErrInvalid, err)
	}
	if buf.Len() == 0 || buf.Bytes()[0] != '{' {
		return nil, fmt.Errorf("%w: not a JSON object", ErrInvalid)
	}
	return buf.Bytes(), nil
}

// commitLoop is the committer. It first waits for the file, leaving the
// queue open, so a caller whose context ends while the file is held by
// another process can still withdraw; then it takes everything queued,
// commits it in one transaction, and goes round again until the queue is
// empty.
func (s *Store) commitLoop() {
	q := &s.audit
	defer q.committer.Done()
	for {
		q.mu.Lock()
		if len(q.queue) == 0 {
			q.committing = false
			q.mu.Unlock()
			return
		}
		// Canceled when every queued caller has withdrawn.
		ctx, cancel := context.WithCancel(context.Background())
		q.cancelWait = cancel
		q.mu.Unlock()

		h, err := s.acquire(ctx)

		q.mu.Lock()
		q.cancelWait = nil
		cancel()
		if errors.Is(err, context.Canceled) {
			q.mu.Unlock()
			continue
		}
		batch := q.queue
		q.queue = nil
		for _, r := range batch {
			r.taken = true
		}
		q.mu.Unlock()

		if err == nil {
			err = s.commitBatch(h, batch)
			s.release(h)
		}
		for _, r := range batch {
			r.err = err
			close(r.done)
		}
	}
}

// commitBatch writes batch as consecutive records in one transaction and
// hands the new head to the anchor writer.
func (s *Store) commitBatch(h *handle, batch []*appendReq) error {
	if len(batch) == 0 {
		return nil
	}
	if err := h.appendBlocked(); err != nil {
		return err
	}
	if err := s.anchors.recover(s.anchorPath); err != nil {
		return err
	}
	var head anchor
	err := h.run(true, func(tx *bolt.Tx) error {
		events := make([][]byte, len(batch))
		for i, r := range batch {
			events[i] = r.event
		}
		var err error
		head, err = appendRecords(tx, s.now().UTC().Format(time.RFC3339Nano), events)
		for i, r := range batch {
			r.seq = head.seq - uint64(len(batch)-1-i)
		}
		return err
	})
	if err != nil {
		for _, r := range batch {
			r.seq = 0
		}
		return err
	}
	s.anchors.queue(s, h, head)
	return nil
}

// appendRecords appends events as consecutive records with time ts and
// returns the new head. If the audit index is complete, it indexes them
// too; otherwise the next listing that needs it catches it up.
func appendRecords(tx *bolt.Tx, ts string, events [][]byte) (anchor, error) {
	b := tx.Bucket(bucketAudit)
	b.FillPercent = 1 // keys only ever grow: fill pages completely
	head, err := auditHead(b)
	if err != nil {
		return head, err
	}
	m, ok := auditIndexed(tx)
	indexing := ok && m == head.seq
	var keys [][]byte
	for _, ev := range events {
		head.seq++
		value, hash := encodeRecord(head.seq, ts, head.hash, ev)
		if err := b.Put(seqKey(head.seq), value); err != nil {
			return head, err
		}
		head.hash = hash
		if indexing {
			keys = append(keys, recordIndexKeys(head.seq, ev)...)
		}
	}
	if !indexing {
		return head, nil
	}
	if err := putIndexKeys(tx, keys); err != nil {
		return head, err
	}
	return head, setAuditIndexed(tx, head.seq)
}

// anchorWriter moves the anchor file forward in the background, so the
// anchor's fsync overlaps the next batch's commit instead of adding to it.
// It writes only the newest head it has been given (an anchor may lag, never
// lead), and it holds a reference on the handle while it runs, so the flock
// is not released before the anchor is on disk.
type anchorWriter struct {
	mu      sync.Mutex
	idle    sync.Cond
	pending *anchor // newest head not yet written
	running bool
	failed  *anchor // head whose write failed, with err
	err     error
	written uint64 // seq of the last anchor written
}

// queue asks for head to be written. The caller holds a reference on h.
func (w *anchorWriter) queue(s *Store, h *handle, head anchor) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.pending = &head
	if w.running {
		return
	}
	w.running = true
	s.mu.Lock()
	s.refs++ // h is in use by the caller, so it is s.h
	s.mu.Unlock()
	go w.loop(s, h)
}

func (w *anchorWriter) loop(s *Store, h *handle) {
	defer s.release(h)
	w.mu.Lock()
	defer w.mu.Unlock()
	for w.pending != nil {
		a := *w.pending
		w.pending = nil
		w.mu.Unlock()
		err := writeAnchor(s.anchorPath, a)
		w.mu.Lock()
		if err != nil {
			w.failed, w.err = &a, err
		} else {
			w.failed, w.err, w.written = nil, nil, a.seq
		}
		w.idle.Broadcast()
	}
	w.running = false
	w.idle.Broadcast()
}

// waitFor waits until the anchor names seq or later, or no write is in
// flight. Unlike wait, it does not starve while appends keep coming.
func (w *anchorWriter) waitFor(seq uint64) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for w.running && w.written < seq {
		w.idle.Wait()
	}
}

// wait waits until no write is in flight and returns the last write's error.
func (w *anchorWriter) wait() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	for w.running {
		w.idle.Wait()
	}
	return w.err
}

// recover retries a failed anchor write. While the anchor cannot be
// written, no more records are appended.
func (w *anchorWriter) recover(path string) error {
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
	if err := writeAnchor(path, *w.failed); err != nil {
		w.err = err
		return fmt.Errorf("store: the audit anchor %s cannot be written, so no more records are appended: %w", path, err)
	}
	w.failed, w.err = nil, nil
	return nil
}

// appendBlocked returns why appends are refused, or nil.
func (h *handle) appendBlocked() error {
	h.anchorMu.Lock()
	defer h.anchorMu.Unlock()
	return h.anchorErr
}

func (h *handle) setAppendBlocked(err error) {
	h.anchorMu.Lock()
	h.anchorErr = err
	h.anchorMu.Unlock()
}

// seqKey is the bbolt key of record seq: 8 bytes, big-endian, so keys sort
// in sequence order.
func seqKey(seq uint64) []byte {
	return binary.BigEndian.AppendUint64(make([]byte, 0, 8), seq)
}

// recordHash is the hash of one record.
func recordHash(seq uint64, ts, prev string, event []byte) string {
	h := sha256.New()
	var num [20]byte
	h.Write([]byte(prev))
	h.Write([]byte{'\n'})
	h.Write(strconv.AppendUint(num[:0], seq, 10))
	h.Write([]byte{'\n'})
	h.Write([]byte(ts))
	h.Write([]byte{'\n'})
	h.Write(event)
	return hex.EncodeToString(h.Sum(nil))
}

// encodeRecord returns the stored form of a record and its hash. The form
// is canonical: verification re-encodes every record and compares bytes.
func encodeRecord(seq uint64, ts, prev string, event []byte) (value []byte, hash string) {
	hash = recordHash(seq, ts, prev, event)
	value = make([]byte, 0, len(event)+len(ts)+2*64+60)
	value = append(value, `{"seq":`...)
	value = strconv.AppendUint(value, seq, 10)
	value = append(value, `,"time":"`...)
	value = append(value, ts...)
	value = append(value, `","prev":"`...)
	value = append(value, prev...)
	value = append(value, `","hash":"`...)
	value = append(value, hash...)
	value = append(value, `","event":`...)
	value = append(value, event...)
	value = append(value, '}')
	return value, hash
}

// canonicalSeq reports whether the stored record v begins with seq as
// encodeRecord writes it.
func canonicalSeq(v []byte, seq uint64) bool {
	var num [20]byte
	d := strconv.AppendUint(num[:0], seq, 10)
	rest, ok := bytes.CutPrefix(v, []byte(`{"seq":`))
	return ok && len(rest) > len(d) && bytes.HasPrefix(rest, d) && rest[len(d)] == ','
}

// rawRecord is a stored record split into its fields. Its slices point into
// the stored bytes.
type rawRecord struct {
	seq   uint64
	ts    string
	prev  string
	hash  string
	event []byte
}

var errMalformed = errors.New("not in the record format")

// parseRecord splits a stored record. It accepts exactly what encodeRecord
// produces, up to the content of the fields.
func parseRecord(v []byte) (rawRecord, error) {
	r, err := splitRecord(v)
	if err == nil && !json.Valid(r.event) {
		err = errMalformed
	}
	return r, err
}

// splitRecord is parseRecord without the check that the event is valid
// JSON (VerifyAudit checks more: that it is compact).
func splitRecord(v []byte) (rawRecord, error) {
	var r rawRecord
	rest, ok := bytes.CutPrefix(v, []byte(`{"seq":`))
	if !ok {
		return r, errMalformed
	}
	i := 0
	for i < len(rest) && rest[i] >= '0' && rest[i] <= '9' {
		i++
	}
	seq, err := strconv.ParseUint(string(rest[:i]), 10, 64)
	if err != nil {
		return r, errMalformed
	}
	r.seq = seq
	rest = rest[i:]
	field := func(prefix string) (string, bool) {
		var ok bool
		if rest, ok = bytes.CutPrefix(rest, []byte(prefix)); !ok {
			return "", false
		}
		end := bytes.IndexByte(rest, '"')
		if end < 0 {
			return "", false
		}
		val := string(rest[:end])
		rest = rest[end+1:]
		return val, true
	}
	if r.ts, ok = field(`,"time":"`); !ok {
		return r, errMalformed
	}
	if r.prev, ok = field(`,"prev":"`); !ok || !isHash(r.prev) {
		return r, errMalformed
	}
	if r.hash, ok = field(`,"hash":"`); !ok || !isHash(r.hash) {
		return r, errMalformed
	}
	if rest, ok = bytes.CutPrefix(rest, []byte(`,"event":`)); !ok || len(rest) < 3 || rest[len(rest)-1] != '}' {
		return r, errMalformed
	}
	r.event = rest[:len(rest)-1]
	if r.event[0] != '{' {
		return r, errMalformed
	}
	return r, nil
}

// isHash reports whether s is 64 lowercase hex digits.
func isHash(s string) bool {
	if len(s) != 64 {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

// toRecord converts a parsed record, copying its bytes.
func (r rawRecord) toRecord() (AuditRecord, error) {
	t, err := time.Parse(time.RFC3339Nano, r.ts)
	if err != nil {
		return AuditRecord{}, err
	}
	return AuditRecord{
		Seq:   r.seq,
		Time:  t,
		Prev:  r.prev,
		Hash:  r.hash,
		Event: bytes.Clone(r.event),
	}, nil
}

// decodeRecord parses the record stored under key seq.
func decodeRecord(path string, seq uint64, v []byte) (AuditRecord, error) {
	raw, err := parseRecord(v)
	if err == nil && raw.seq != seq {
		err = fmt.Errorf("stored under key %d", seq)
	}
	var rec AuditRecord
	if err == nil {
		rec, err = raw.toRecord()
	}
	if err != nil {
		return AuditRecord{}, corruptf(path, "audit record %d is malformed (%v); run \"warden audit verify\"", seq, err)
	}
	return rec, nil
}

// anchor is the head of the log as recorded in the anchor file.
type anchor struct {
	seq  uint64
	hash string
}

var genesis = anchor{seq: 0, hash: zeroHash}

// auditHead returns the last record's sequence number and hash.
func auditHead(b *bolt.Bucket) (anchor, error) {
	k, v := b.Cursor().Last()
	if k == nil {
		return genesis, nil
	}
	if len(k) == 8 && v != nil {
		seq := binary.BigEndian.Uint64(k)
		if r, err := parseRecord(v); err == nil && r.seq == seq {
			return anchor{seq: seq, hash: r.hash}, nil
		}
	}
	return anchor{}, fmt.Errorf("%w: the last audit record (key %x) is unreadable; run \"warden audit verify\"", ErrTampered, k)
}

func encodeAnchor(a anchor) []byte {
	b := append([]byte(`{"seq":`), strconv.FormatUint(a.seq, 10)...)
	b = append(b, `,"hash":"`...)
	b = append(b, a.hash...)
	return append(b, "\"}\n"...)
}

// parseAnchor accepts exactly what encodeAnchor produces.
func parseAnchor(b []byte) (anchor, bool) {
	rest, ok := bytes.CutPrefix(b, []byte(`{"seq":`))
	if !ok {
		return anchor{}, false
	}
	i := bytes.IndexByte(rest, ',')
	if i < 0 {
		return anchor{}, false
	}
	seq, err := strconv.ParseUint(string(rest[:i]), 10, 64)
	if err != nil {
		return anchor{}, false
	}
	rest, ok = bytes.CutPrefix(rest[i:], []byte(`,"hash":"`))
	if !ok || len(rest) < 64 {
		return anchor{}, false
	}
	a := anchor{seq: seq, hash: string(rest[:64])}
	if !isHash(a.hash) || (a.seq == 0 && a.hash != zeroHash) || !bytes.Equal(encodeAnchor(a), b) {
		return anchor{}, false
	}
	return a, true
}

// anchorTempInfix marks the temporary files writeAnchor renames into place.
const anchorTempInfix = ".tmp-"

// writeFile writes the anchor's bytes; tests replace it to make the
// disk full.
var writeFile = (*os.File).Write

// writeAnchor replaces the anchor file atomically: temporary file in the
// same directory, fsync, rename.
func writeAnchor(path string, a anchor) error {
	f, err := os.CreateTemp(filepath.Dir(path), filepath.Base(path)+anchorTempInfix+"*")
	if err != nil {
		return Classify(filepath.Dir(path), err)
	}
	_, err = writeFile(f, encodeAnchor(a))
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(f.Name(), path)
	}
	if err != nil {
		os.Remove(f.Name())
	}
	return Classify(path, err)
}

// maxAnchorSize bounds how much of an anchor file is read; a valid one is
// under 100 bytes.
const maxAnchorSize = 1024

// readAnchor reads the anchor file: found is false if it does not exist,
// ok is false if it is not a valid anchor, and err reports I/O errors.
func readAnchor(path string) (a anchor, found, ok bool, err error) {
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return anchor{}, false, false, nil
	}
	if err != nil {
		return anchor{}, false, false, fmt.Errorf("store: reading the audit anchor: %w", err)
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxAnchorSize+1))
	if err != nil {
		return anchor{}, true, false, fmt.Errorf("store: reading the audit anchor: %w", err)
	}
	a, ok = parseAnchor(b)
	return a, true, ok, nil
}

// checkAnchor compares the anchor file with a log whose (verified) head is
// head. It returns firstBad 0 if they agree, else the first record that
// cannot be vouched for and why.
func (s *Store) checkAnchor(b *bolt.Bucket, head anchor) (a anchor, firstBad uint64, reason string, err error) {
	a, found, ok, err := readAnchor(s.anchorPath)
	switch {
	case err != nil:
		return a, 0, "", err
	case !found:
		if head.seq == 0 {
			return a, 0, "", nil
		}
		return a, head.seq + 1, fmt.Sprintf("the audit anchor %s is missing, so records after %d may have been removed; restore it, or accept the log as it is with Reanchor", s.anchorPath, head.seq), nil
	case !ok:
		return a, head.seq + 1, fmt.Sprintf("the audit anchor %s is garbled, so records after %d may have been removed", s.anchorPath, head.seq), nil
	case a.seq > head.seq:
		return a, head.seq + 1, fmt.Sprintf("the anchor names record %d but the log ends at record %d: records were removed from the tail, or the database was rolled back to an older copy", a.seq, head.seq), nil
	case a.seq == 0:
		return a, 0, "", nil
	}
	v := b.Get(seqKey(a.seq))
	if r, perr := parseRecord(v); perr != nil || r.hash != a.hash {
		return a, a.seq, fmt.Sprintf("record %d is not the record the anchor names (its hash differs): the database was replaced or rolled back and rewritten", a.seq), nil
	}
	return a, 0, "", nil
}

// checkAnchorOnOpen runs when a handle is opened (under the flock). It
// writes the genesis anchor for an empty log that has none, and blocks
// appends through h if the anchor disagrees with the log.
func (s *Store) checkAnchorOnOpen(h *handle) error {
	var blocked error
	var writeGenesis bool
	err := h.run(false, func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketAudit)
		head, err := auditHead(b)
		if err != nil {
			blocked = err
			return nil
		}
		_, firstBad, reason, err := s.checkAnchor(b, head)
		if err != nil {
			return err
		}
		if firstBad != 0 {
			blocked = fmt.Errorf("%w: refusing to append to the audit log: %s", ErrTampered, reason)
		}
		if head.seq == 0 {
			_, found, _, _ := readAnchor(s.anchorPath)
			writeGenesis = !found
		}
		return nil
	})
	if err != nil {
		return err
	}
	if writeGenesis {
		if err := os.MkdirAll(filepath.Dir(s.anchorPath), 0o700); err != nil {
			return fmt.Errorf("store: creating the audit anchor: %w", err)
		}
		if err := writeAnchor(s.anchorPath, genesis); err != nil {
			return fmt.Errorf("store: creating the audit anchor: %w", err)
		}
	}
	h.setAppendBlocked(blocked)
	return nil
}

// auditScan drives scanAudit.
type auditScan struct {
	// visit is called for each record in key order (reverse: from the
	// last), inside a read transaction; it returns false to stop. Its
	// arguments are valid only during the call.
	visit func(k, v []byte) (bool, error)
	// begin, if set, is called at the start of each transaction.
	begin func(tx *bolt.Tx) error
	// atEnd, if set, is called in the same transaction once the last
	// record has been visited.
	atEnd func(h *handle, b *bolt.Bucket) error
	// flush, if set, is called after each transaction ends.
	flush func() error
	// reverse visits the records from the last key <= start (nil: from
	// the last record) down.
	reverse bool
}

// scanAudit visits the records from the first key >= start (nil: all) in
// read transactions of auditChunk records each.
func (s *Store) scanAudit(ctx context.Context, start []byte, sc auditScan) error {
	var last []byte // last key visited
	for done := false; !done; {
		err := s.withHandle(ctx, func(h *handle) error {
			return h.run(false, func(tx *bolt.Tx) error {
				if sc.begin != nil {
					if err := sc.begin(tx); err != nil {
						done = true
						return err
					}
				}
				b := tx.Bucket(bucketAudit)
				c := b.Cursor()
				k, v := scanStart(c, start, last, sc.reverse)
				for n := 0; k != nil; {
					if n == auditChunk {
						return nil
					}
					if n%256 == 0 {
						if err := ctx.Err(); err != nil {
							return err
						}
					}
					more, err := sc.visit(k, v)
					if err != nil || !more {
						done = true
						return err
					}
					last = append(last[:0], k...)
					n++
					if sc.reverse {
						k, v = c.Prev()
					} else {
						k, v = c.Next()
					}
				}
				done = true
				if sc.atEnd != nil {
					return sc.atEnd(h, b)
				}
				return nil
			})
		})
		if err == nil && sc.flush != nil {
			err = sc.flush()
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// scanStart positions c where a scan (or its next chunk, after the key
// last) starts.
func scanStart(c *bolt.Cursor, start, last []byte, reverse bool) (k, v []byte) {
	if !reverse {
		switch {
		case last != nil:
			if k, v = c.Seek(last); bytes.Equal(k, last) {
				k, v = c.Next()
			}
		case start != nil:
			k, v = c.Seek(start)
		default:
			k, v = c.First()
		}
		return k, v
	}
	from := last
	if from == nil {
		from = start
	}
	if from == nil {
		return c.Last()
	}
	k, v = c.Seek(from)
	switch {
	case k == nil: // every key is below from
		return c.Last()
	case bytes.Compare(k, from) > 0 || last != nil:
		return c.Prev()
	}
	return k, v
}

// AuditRecord returns the record with sequence number seq, or an error
// wrapping ErrNotFound.
func (s *Store) AuditRecord(ctx context.Context, seq uint64) (AuditRecord, error) {
	var rec AuditRecord
	err := s.view(ctx, func(tx *bolt.Tx) error {
		v := tx.Bucket(bucketAudit).Get(seqKey(seq))
		if v == nil {
			return fmt.Errorf("audit record %d: %w", seq, ErrNotFound)
		}
		var err error
		rec, err = decodeRecord(s.path, seq, v)
		return err
	})
	return rec, err
}

// eventMatches reports whether the event's top-level "run_id" and "tool"
// string fields equal runID and tool (an empty want matches anything).
// Field names are matched exactly.
func eventMatches(event []byte, runID, tool string) bool {
	if runID == "" && tool == "" {
		return true
	}
	if !json.Valid(event) {
		return false
	}
	r, t := eventKeys(event)
	return (runID == "" || r == runID) && (tool == "" || t == tool)
}

// ExportAudit writes the whole log to w as JSON Lines, one record per line,
// each line the record exactly as stored (what the hashes cover). The file
// is not held while w is written to.
func (s *Store) ExportAudit(ctx context.Context, w io.Writer) error {
	var buf bytes.Buffer
	return s.scanAudit(ctx, nil, auditScan{
		visit: func(k, v []byte) (bool, error) {
			buf.Write(v)
			buf.WriteByte('\n')
			return true, nil
		},
		flush: func() error {
			_, err := w.Write(buf.Bytes())
			buf.Reset()
			return err
		},
	})
}

// VerifyAudit checks the whole log: every record is well formed, stored
// under its own sequence number, gapless, hashes to its hash and links to
// its predecessor; and the anchor names a record of the log with that hash.
// On the first failure it fills FirstBad and Reason and returns an error
// wrapping ErrTampered; other errors are I/O errors.
func (s *Store) VerifyAudit(ctx context.Context) (VerifyReport, error) {
	return s.verify(ctx, false)
}

// Reanchor verifies the records like VerifyAudit, ignoring the anchor, and
// if they verify makes the anchor name the current head. It is for an owner
// who has checked why the anchor disagrees (for example the database was
// restored from a backup on purpose, or moved without its anchor); appends
// are refused until then.
func (s *Store) Reanchor(ctx context.Context) (VerifyReport, error) {
	return s.verify(ctx, true)
}

func (s *Store) verify(ctx context.Context, reanchor bool) (VerifyReport, error) {
	var rep VerifyReport
	var ic indexCheck
	var compact bytes.Buffer // the event compacted: valid JSON, and compact, if it equals the event
	head := genesis
	next := uint64(1)
	bad := func(seq uint64, format string, args ...any) (bool, error) {
		rep.FirstBad, rep.Reason = seq, fmt.Sprintf(format, args...)
		return false, nil
	}
	visit := func(k, v []byte) (bool, error) {
		if len(k) != 8 {
			return bad(next, "unexpected key %x where record %d should be", k, next)
		}
		seq := binary.BigEndian.Uint64(k)
		switch {
		case seq > next:
			return bad(next, "record %d is missing (deleted); the next record is %d", next, seq)
		case seq < next:
			return bad(next, "unexpected record under key %d", seq)
		case v == nil:
			return bad(seq, "record %d is a bucket, not a record", seq)
		}
		r, err := splitRecord(v)
		if err != nil {
			return bad(seq, "record %d has been modified: it is not a well-formed record", seq)
		}
		if r.seq != seq {
			return bad(seq, "record %d holds record %d: a record was duplicated, copied or swapped", seq, r.seq)
		}
		if t, err := time.Parse(time.RFC3339Nano, r.ts); err != nil || t.UTC().Format(time.RFC3339Nano) != r.ts {
			return bad(seq, "record %d has been modified: its time is not a canonical UTC time", seq)
		}
		compact.Reset()
		if json.Compact(&compact, r.event) != nil || !bytes.Equal(compact.Bytes(), r.event) {
			return bad(seq, "record %d has been modified: its event is not a compact JSON object", seq)
		}
		// v is the record's canonical encoding (encodeRecord) if its
		// sequence number is written canonically and its hash is the
		// hash of its content: splitRecord accepts nothing else.
		if !canonicalSeq(v, seq) || recordHash(seq, r.ts, r.prev, r.event) != r.hash {
			return bad(seq, "record %d has been modified: its content does not match its hash", seq)
		}
		if r.prev != head.hash {
			return bad(seq, "record %d does not follow record %d (its prev is not that record's hash): records were removed, reordered or rewritten", seq, head.seq)
		}
		if !reanchor {
			ic.record(seq, r.event)
		}
		head = anchor{seq: seq, hash: r.hash}
		rep.Records++
		next++
		return true, nil
	}
	atEnd := func(h *handle, b *bolt.Bucket) error {
		// Let this process's own anchor write catch up, so the report
		// shows the anchor as of the records read. (If that write
		// failed, the older anchor on disk lags, which verifies.)
		s.anchors.waitFor(head.seq)
		if reanchor {
			if err := writeAnchor(s.anchorPath, head); err != nil {
				return fmt.Errorf("store: writing the audit anchor: %w", err)
			}
			h.setAppendBlocked(nil)
			rep.AnchorSeq = head.seq
			return nil
		}
		a, firstBad, reason, err := s.checkAnchor(b, head)
		rep.AnchorSeq = a.seq
		rep.FirstBad, rep.Reason = firstBad, reason
		if err == nil && firstBad == 0 {
			ic.end(b.Tx(), head.seq)
			rep.FirstBad, rep.Reason = ic.bad, ic.reason
		}
		return err
	}
	// atEnd only runs if every record verified.
	err := s.scanAudit(ctx, nil, auditScan{visit: visit, atEnd: atEnd, begin: ic.begin})
	rep.HeadSeq, rep.HeadHash = head.seq, head.hash
	if err != nil {
		return rep, err
	}
	if reanchor {
		if err := s.rebuildAuditIndex(ctx); err != nil {
			return rep, err
		}
	}
	if rep.FirstBad != 0 {
		return rep, fmt.Errorf("%w: first bad record %d: %s", ErrTampered, rep.FirstBad, rep.Reason)
	}
	return rep, nil
}

// isCompactObject reports whether b, a valid JSON object, has no
// insignificant whitespace.
func isCompactObject(b []byte) bool {
	var buf bytes.Buffer
	return json.Compact(&buf, b) == nil && bytes.Equal(buf.Bytes(), b)
}
