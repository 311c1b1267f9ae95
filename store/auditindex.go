package store

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"hash/maphash"
	"slices"

	bolt "go.etcd.io/bbolt"

	"github.com/wardenrt/warden/internal/jsontop"
)

// The audit index. "warden audit ls --tool T" and "--run ID" read the
// records of one tool or run through bucketAuditIndex instead of scanning
// the log: one empty value per record and field under
//
//	kind (1 byte: 'r' run_id, 't' tool) | uvarint len(value) | value | seq (8 bytes, big-endian)
//
// so a field's records sort by sequence number under one prefix. The meta
// key auditIndexedKey holds the sequence number up to which the index is
// complete (8 bytes, big-endian; absent: 0).
//
// The index is derived data, outside the hash chain, so nothing in it is
// trusted: a listing checks every record it reads through the index
// against the filter (an index entry cannot make a record appear under a
// tool or run it does not have), records after the marker are scanned, and
// VerifyAudit checks that the index holds exactly the entries the records
// call for (an entry removed to hide a record, or added, is reported).
// Appends keep the index complete when it is; a store made before the
// index existed (or whose index an older warden left behind) has it built,
// or caught up, by the first listing that needs it, in transactions of
// auditIndexChunk records; the marker only moves over records it read (a
// key or record it cannot read stops it, for the listing's scan to
// report). Reanchor rebuilds it.

var (
	bucketAuditIndex = []byte("audit_index")
	auditIndexedKey  = []byte("audit_indexed")
)

// Index kinds.
const (
	indexRun  byte = 'r'
	indexTool byte = 't'
)

// auditIndexChunk is how many records one transaction of an index build
// covers.
var auditIndexChunk uint64 = 50_000

// indexPrefix is the key prefix of the records whose field kind is value.
func indexPrefix(kind byte, value string) []byte {
	return appendIndexPrefix(make([]byte, 0, 1+binary.MaxVarintLen64+len(value)+8), kind, value)
}

func appendIndexPrefix(dst []byte, kind byte, value string) []byte {
	dst = append(dst, kind)
	dst = binary.AppendUvarint(dst, uint64(len(value)))
	return append(dst, value...)
}

// indexKey is the key of record seq under kind and value.
func indexKey(kind byte, value string, seq uint64) []byte {
	return binary.BigEndian.AppendUint64(indexPrefix(kind, value), seq)
}

func appendIndexKey(dst []byte, kind byte, value string, seq uint64) []byte {
	return binary.BigEndian.AppendUint64(appendIndexPrefix(dst, kind, value), seq)
}

// parseIndexKey splits an index key; ok is false if it is malformed.
func parseIndexKey(k []byte) (kind byte, value string, seq uint64, ok bool) {
	if len(k) < 1+1+8 || (k[0] != indexRun && k[0] != indexTool) {
		return 0, "", 0, false
	}
	n, w := binary.Uvarint(k[1:])
	if w <= 0 || n == 0 || uint64(len(k)) != 1+uint64(w)+n+8 {
		return 0, "", 0, false
	}
	return k[0], string(k[1+w : len(k)-8]), binary.BigEndian.Uint64(k[len(k)-8:]), true
}

// recordIndexKeys returns the index keys of record seq, whose event is
// valid JSON.
func recordIndexKeys(seq uint64, event []byte) [][]byte {
	runID, tool := eventKeys(event)
	var keys [][]byte
	if runID != "" {
		keys = append(keys, indexKey(indexRun, runID, seq))
	}
	if tool != "" {
		keys = append(keys, indexKey(indexTool, tool, seq))
	}
	return keys
}

// auditIndexed returns the sequence number up to which the index is
// complete; ok is false if the marker is malformed.
func auditIndexed(tx *bolt.Tx) (seq uint64, ok bool) {
	v := tx.Bucket(bucketMeta).Get(auditIndexedKey)
	switch {
	case v == nil:
		return 0, true
	case len(v) != 8:
		return 0, false
	}
	return binary.BigEndian.Uint64(v), true
}

func setAuditIndexed(tx *bolt.Tx, seq uint64) error {
	return tx.Bucket(bucketMeta).Put(auditIndexedKey, seqKey(seq))
}

// indexUsable returns the sequence number up to which a listing may read
// the index: the marker, or 0 if the marker is malformed or names a record
// past the head (then nothing is read through the index).
func indexUsable(tx *bolt.Tx, head uint64) uint64 {
	m, ok := auditIndexed(tx)
	if !ok || m > head {
		return 0
	}
	return m
}

// eventKeys returns the event's top-level "run_id" and "tool" fields as
// a JSON decoder reads them into a map (jsontop.Strings). The event must
// be valid JSON.
func eventKeys(event []byte) (runID, tool string) {
	v := jsontop.Strings(event, "run_id", "tool")
	return v[0], v[1]
}

// putIndexKeys adds keys to the index, in key order (bbolt splits a node
// only when the transaction commits: keys put out of order into a node
// that keeps growing cost a copy of its tail each).
func putIndexKeys(tx *bolt.Tx, keys [][]byte) error {
	slices.SortFunc(keys, bytes.Compare)
	ix := tx.Bucket(bucketAuditIndex)
	for _, k := range keys {
		if err := ix.Put(k, nil); err != nil {
			return err
		}
	}
	return nil
}

// catchUpAuditIndex indexes the records after the marker, in
// transactions of auditIndexChunk records, until the index is complete.
// An index whose marker is malformed or past the head is left alone:
// listings do not read it, and VerifyAudit reports it.
func (s *Store) catchUpAuditIndex(ctx context.Context) error {
	behind := false
	err := s.view(ctx, func(tx *bolt.Tx) error {
		if head, err := auditHead(tx.Bucket(bucketAudit)); err == nil {
			m, ok := auditIndexed(tx)
			behind = ok && m < head.seq
		}
		return nil
	})
	if err != nil || !behind {
		return err
	}
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		done, wrote := false, false
		err := s.update(ctx, func(tx *bolt.Tx) error {
			b := tx.Bucket(bucketAudit)
			head, err := auditHead(b)
			if err != nil {
				done = true
				return nil // VerifyAudit's to report; listings scan
			}
			m, ok := auditIndexed(tx)
			if !ok || m >= head.seq {
				done = true
				return nil
			}
			upto := min(head.seq, m+auditIndexChunk)
			keys, upto, stopped := indexRecords(b, m, upto)
			if upto == m {
				done = true // stopped at once: nothing to write
				return nil
			}
			if err := putIndexKeys(tx, keys); err != nil {
				return err
			}
			done, wrote = stopped || upto == head.seq, true
			return setAuditIndexed(tx, upto)
		})
		if err == nil && wrote {
			upgraded()
		}
		if err != nil || done {
			return err
		}
	}
}

// indexRecords returns the index keys of the records in (m, upto], and
// the last record it read: upto, unless a key that is not a record's or a
// record it cannot parse stopped it (stopped), so that the index is never
// marked as holding a record it did not read. Listings scan the records
// past it, and report what is wrong.
func indexRecords(b *bolt.Bucket, m, upto uint64) (keys [][]byte, last uint64, stopped bool) {
	c := b.Cursor()
	for k, v := c.Seek(seqKey(m + 1)); k != nil; k, v = c.Next() {
		if len(k) != 8 {
			return keys, m, true
		}
		seq := binary.BigEndian.Uint64(k)
		if seq > upto {
			break
		}
		r, err := parseRecord(v)
		if err != nil || r.seq != seq {
			return keys, m, true
		}
		keys, m = append(keys, recordIndexKeys(seq, r.event)...), seq
	}
	return keys, upto, false
}

// rebuildAuditIndex empties the index and builds it again.
func (s *Store) rebuildAuditIndex(ctx context.Context) error {
	err := s.update(ctx, func(tx *bolt.Tx) error {
		if err := tx.DeleteBucket(bucketAuditIndex); err != nil {
			return err
		}
		if _, err := tx.CreateBucket(bucketAuditIndex); err != nil {
			return err
		}
		return setAuditIndexed(tx, 0)
	})
	if err != nil {
		return fmt.Errorf("store: rebuilding the audit index: %w", err)
	}
	return s.catchUpAuditIndex(ctx)
}

// indexCheck is VerifyAudit's check of the audit index: the records up to
// the marker (as it was when the check began) have their entries, and the
// index holds no others for them, none past the marker and nothing
// malformed. The entries the records call for and those the index holds
// are compared as multisets by a digest keyed afresh by each check (so
// that no one who can write the file can make two different sets agree),
// in one sequential pass over each; only when they differ are the records
// looked up one by one, to name the first that is wrong.
type indexCheck struct {
	idx       *bolt.Bucket // of the current transaction
	started   bool
	marker    uint64 // when the check began
	badMarker bool
	seeds     [2]maphash.Seed
	want      setDigest // the entries the records up to marker call for
	buf       []byte
	bad       uint64 // the record the first problem is about, 0 if none
	reason    string
}

// setDigest is an order-independent digest of a set of keys: their count
// and two sums of keyed hashes.
type setDigest struct {
	n    uint64
	sums [2]uint64
}

func (d *setDigest) add(seeds *[2]maphash.Seed, k []byte) {
	d.n++
	d.sums[0] += maphash.Bytes(seeds[0], k)
	d.sums[1] += maphash.Bytes(seeds[1], k)
}

// repairHint ends the report of an index that disagrees with the records.
const repairHint = "; the records themselves verify, and \"warden audit reanchor\" rebuilds the index"

func (c *indexCheck) fail(seq uint64, format string, args ...any) {
	if c.bad == 0 {
		c.bad, c.reason = seq, fmt.Sprintf(format, args...)+repairHint
	}
}

func kindName(kind byte) string {
	if kind == indexRun {
		return "run_id"
	}
	return "tool"
}

// begin is called at the start of each read transaction of the scan.
func (c *indexCheck) begin(tx *bolt.Tx) error {
	c.idx = tx.Bucket(bucketAuditIndex)
	if !c.started {
		c.started = true
		var ok bool
		c.marker, ok = auditIndexed(tx)
		c.badMarker = !ok
		c.seeds = [2]maphash.Seed{maphash.MakeSeed(), maphash.MakeSeed()}
	}
	return nil
}

// record adds the entries of record seq, which verified.
func (c *indexCheck) record(seq uint64, event []byte) {
	if seq > c.marker || c.badMarker {
		return
	}
	runID, tool := eventKeys(event)
	if runID != "" {
		c.buf = appendIndexKey(c.buf[:0], indexRun, runID, seq)
		c.want.add(&c.seeds, c.buf)
	}
	if tool != "" {
		c.buf = appendIndexKey(c.buf[:0], indexTool, tool, seq)
		c.want.add(&c.seeds, c.buf)
	}
}

// end checks the marker and the index's entries, in the scan's last
// transaction, once every record up to head has verified.
func (c *indexCheck) end(tx *bolt.Tx, head uint64) {
	if c.idx == nil {
		return
	}
	m, ok := auditIndexed(tx)
	switch {
	case c.badMarker || !ok:
		c.fail(head+1, "the audit index's marker is malformed")
		return
	case m > head:
		c.fail(head+1, "the audit index claims to hold the records up to %d, but the log ends at record %d", m, head)
		return
	case m < c.marker:
		return // rebuilt meanwhile (Reanchor)
	}
	var got setDigest
	cur := c.idx.Cursor()
	for k, _ := cur.First(); k != nil; k, _ = cur.Next() {
		_, _, seq, ok := parseIndexKey(k)
		switch {
		case !ok:
			c.fail(head+1, "the audit index holds a malformed entry %q", k)
			return
		case seq > m:
			c.fail(seq, "the audit index lists record %d, past the records it holds (up to %d)", seq, m)
			return
		case seq <= c.marker:
			got.add(&c.seeds, k)
		}
	}
	if got != c.want {
		c.locate(tx)
	}
}

// locate names the first record (by sequence number) missing from the
// index under its run or tool, or listed under one that is not its own.
func (c *indexCheck) locate(tx *bolt.Tx) {
	audit := tx.Bucket(bucketAudit)
	var first uint64
	var what string
	ac := audit.Cursor()
	for k, v := ac.First(); k != nil && first == 0; k, v = ac.Next() {
		seq := binary.BigEndian.Uint64(k)
		if seq > c.marker {
			break
		}
		r, err := parseRecord(v)
		if err != nil {
			continue
		}
		for _, want := range recordIndexKeys(seq, r.event) {
			if c.idx.Get(want) == nil {
				kind, value, _, _ := parseIndexKey(want)
				first, what = seq, fmt.Sprintf("record %d is missing from the audit index under its %s %q, so listings by it would not show the record", seq, kindName(kind), value)
				break
			}
		}
	}
	cur := c.idx.Cursor()
	for k, _ := cur.First(); k != nil; k, _ = cur.Next() {
		kind, value, seq, _ := parseIndexKey(k)
		if seq > c.marker || (first != 0 && seq >= first) {
			continue
		}
		r, err := parseRecord(audit.Get(seqKey(seq)))
		if err == nil && slices.ContainsFunc(recordIndexKeys(seq, r.event), func(want []byte) bool { return bytes.Equal(want, k) }) {
			continue
		}
		first, what = seq, fmt.Sprintf("record %d is listed in the audit index under %s %q, which is not its own, so listings by it would offer the record", seq, kindName(kind), value)
	}
	if first == 0 {
		first, what = max(c.marker, 1), "the audit index holds entries the records do not call for"
	}
	c.fail(first, "%s", what)
}
