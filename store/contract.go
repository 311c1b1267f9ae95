package store

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"time"

	"github.com/wardenrt/warden/internal/runpatch"
	"github.com/wardenrt/warden/store/internal/memindex"
)

// Backend is the store contract: what every backend provides (this
// package's bbolt Store, store/postgres) and what warden's commands depend
// on. The conformance suite in store/storetest holds every backend to it.
type Backend interface {
	AppendAudit(ctx context.Context, event json.RawMessage) (uint64, error)
	ListAudit(ctx context.Context, f AuditFilter) ([]AuditRecord, error)
	AuditRecord(ctx context.Context, seq uint64) (AuditRecord, error)
	ExportAudit(ctx context.Context, w io.Writer) error
	VerifyAudit(ctx context.Context) (VerifyReport, error)
	Reanchor(ctx context.Context) (VerifyReport, error)

	PutMemory(ctx context.Context, ns, key, value string) error
	GetMemory(ctx context.Context, ns, key string) (MemoryEntry, error)
	ListMemory(ctx context.Context, ns string, limit int) ([]MemoryEntry, error)
	DeleteMemory(ctx context.Context, ns, key string) error
	SearchMemory(ctx context.Context, q MemoryQuery) ([]MemoryHit, error)

	PutRun(ctx context.Context, id string, doc json.RawMessage) error
	Run(ctx context.Context, id string) (json.RawMessage, error)
	// UpdateRun replaces run id's document by what fn makes of it, in one
	// transaction; fn's error aborts the change and is returned.
	UpdateRun(ctx context.Context, id string, fn func(json.RawMessage) (json.RawMessage, error)) error
	ListRuns(ctx context.Context, limit int) ([]json.RawMessage, error)
	// PatchRun writes run id's record in parts: its head and the list
	// elements new or changed since the last write (see runpatch), so a
	// run's record costs what changed, not its whole length, at each
	// step. Run and ListRuns give the whole document back.
	PatchRun(ctx context.Context, id string, p runpatch.Patch) error

	PutArtifact(ctx context.Context, data []byte) (digest string, err error)
	Artifact(ctx context.Context, digest string) ([]byte, error)

	PutPin(ctx context.Context, name string, doc json.RawMessage) error
	Pin(ctx context.Context, name string) (json.RawMessage, error)
	DeletePin(ctx context.Context, name string) error
	ListPins(ctx context.Context) (map[string]json.RawMessage, error)

	PutGrant(ctx context.Context, id string, doc json.RawMessage) error
	DeleteGrant(ctx context.Context, id string) error
	ListGrants(ctx context.Context) (map[string]json.RawMessage, error)

	PutTrust(ctx context.Context, path string, doc json.RawMessage) error
	Trust(ctx context.Context, path string) (json.RawMessage, error)
	DeleteTrust(ctx context.Context, path string) error
	ListTrust(ctx context.Context) (map[string]json.RawMessage, error)

	CreateJob(ctx context.Context, id string, doc json.RawMessage) error
	Job(ctx context.Context, id string) (json.RawMessage, error)
	UpdateJob(ctx context.Context, id string, fn func(json.RawMessage) (json.RawMessage, error)) error
	DeleteJob(ctx context.Context, id string) error
	ListJobs(ctx context.Context) (map[string]json.RawMessage, error)

	// Stats counts what the store holds (not for hot paths).
	Stats(ctx context.Context) (Stats, error)
	Close() error
}

var _ Backend = (*Store)(nil)

// ErrUnavailable means a store on a server could not be reached (or
// stopped answering) within its timeouts. Local stores never return it.
var ErrUnavailable = fmt.Errorf("store unavailable")

// The rest of this file is the contract's formats, exported for other
// backends so that every backend stores, hashes, validates and ranks
// exactly alike: an audit record written by one verifies by the rules of
// the other, and a memory search ranks the same entries the same way.

// ZeroHash is the prev of the first audit record and the hash of the
// genesis anchor.
const ZeroHash = zeroHash

// ValidName checks a namespace, key, run id, pin, grant, trust or job name:
// non-empty, at most 256 bytes of valid UTF-8, no NUL. Its error wraps
// ErrInvalid.
func ValidName(kind, s string) error { return validName(kind, s) }

// CompactEvent checks that event is one JSON object and returns it
// compacted (the form AppendAudit stores). Its error wraps ErrInvalid.
func CompactEvent(event []byte) ([]byte, error) {
	ev, err := compactObject(event)
	if err != nil {
		return nil, fmt.Errorf("store: audit event: %w", err)
	}
	return ev, nil
}

// CompactDoc checks that doc is one JSON value and returns it compacted
// (the form runs, pins, grants, trust records and jobs are stored in).
func CompactDoc(what string, doc []byte) ([]byte, error) { return compactJSON(what, doc) }

// FormatRecordTime is the canonical form of a record's time, which its
// hash covers.
func FormatRecordTime(t time.Time) string { return t.UTC().Format(time.RFC3339Nano) }

// EncodeRecord returns the canonical form of an audit record (one line of
// ExportAudit) and its hash.
func EncodeRecord(seq uint64, ts, prev string, event []byte) (line []byte, hash string) {
	return encodeRecord(seq, ts, prev, event)
}

// IsHash reports whether s is 64 lowercase hex digits.
func IsHash(s string) bool { return isHash(s) }

// EventMatches reports whether the event's top-level "run_id" and "tool"
// string fields equal runID and tool (an empty want matches anything).
func EventMatches(event []byte, runID, tool string) bool { return eventMatches(event, runID, tool) }

// Digest is the artifact digest of data: "sha256:<hex>".
func Digest(data []byte) string {
	sum := sha256.Sum256(data)
	return digestPrefix + hex.EncodeToString(sum[:])
}

// ParseDigest returns the raw SHA-256 of a "sha256:<64 lowercase hex>"
// digest; its error wraps ErrInvalid.
func ParseDigest(digest string) ([]byte, error) { return parseDigest(digest) }

// Anchor is an audit head as an anchor file records it.
type Anchor struct {
	Seq  uint64
	Hash string
}

// ReadAnchor reads an anchor file: found is false if it does not exist, ok
// is false if it is not a valid anchor, err reports I/O errors.
func ReadAnchor(path string) (a Anchor, found, ok bool, err error) {
	x, found, ok, err := readAnchor(path)
	return Anchor{Seq: x.seq, Hash: x.hash}, found, ok, err
}

// WriteAnchor replaces an anchor file atomically (temporary file, fsync,
// rename).
func WriteAnchor(path string, a Anchor) error {
	return writeAnchor(path, anchor{seq: a.Seq, hash: a.Hash})
}

// ChainVerifier checks audit records one at a time, in sequence order, by
// the rules of VerifyAudit: gapless from 1, canonical time and event,
// content matching its hash, each linked to its predecessor. The zero
// value is ready to check record 1.
type ChainVerifier struct {
	head    anchor
	next    uint64
	started bool
	rep     VerifyReport
}

// Check checks the next record. It returns false at the first record that
// fails (Report then says which and why); later calls return false.
func (c *ChainVerifier) Check(seq uint64, ts, prev, hash string, event []byte) bool {
	if !c.started {
		c.head, c.next, c.started = genesis, 1, true
	}
	if c.rep.FirstBad != 0 {
		return false
	}
	bad := func(seq uint64, format string, args ...any) bool {
		c.rep.FirstBad, c.rep.Reason = seq, fmt.Sprintf(format, args...)
		return false
	}
	switch {
	case seq > c.next:
		return bad(c.next, "record %d is missing (deleted); the next record is %d", c.next, seq)
	case seq < c.next:
		return bad(c.next, "unexpected record under key %d", seq)
	}
	if t, err := time.Parse(time.RFC3339Nano, ts); err != nil || t.UTC().Format(time.RFC3339Nano) != ts {
		return bad(seq, "record %d has been modified: its time is not a canonical UTC time", seq)
	}
	if len(event) == 0 || event[0] != '{' || !json.Valid(event) || !isCompactObject(event) {
		return bad(seq, "record %d has been modified: its event is not a compact JSON object", seq)
	}
	if !isHash(prev) || !isHash(hash) || recordHash(seq, ts, prev, event) != hash {
		return bad(seq, "record %d has been modified: its content does not match its hash", seq)
	}
	if prev != c.head.hash {
		return bad(seq, "record %d does not follow record %d (its prev is not that record's hash): records were removed, reordered or rewritten", seq, c.head.seq)
	}
	c.head = anchor{seq: seq, hash: hash}
	c.rep.Records++
	c.next++
	return true
}

// Report returns what has been checked: the verified prefix and, if a
// record failed, FirstBad and Reason.
func (c *ChainVerifier) Report() VerifyReport {
	rep := c.rep
	if c.started {
		rep.HeadSeq, rep.HeadHash = c.head.seq, c.head.hash
	} else {
		rep.HeadHash = zeroHash
	}
	return rep
}

// Head returns the last verified record.
func (c *ChainVerifier) Head() Anchor {
	if !c.started {
		return Anchor{Hash: zeroHash}
	}
	return Anchor{Seq: c.head.seq, Hash: c.head.hash}
}

// QueryTerms returns the distinct search terms of a memory query, in order,
// at most 32 of them (the tokenizer SearchMemory uses).
func QueryTerms(text string) []string { return memindex.QueryTerms(text) }

// TermFreqs returns the distinct terms of a memory value with their
// frequencies, and its length in terms.
func TermFreqs(value string) (map[string]uint32, uint32) { return memindex.TermFreqs(value) }

// BM25IDF is the inverse document frequency of a term found in df of docs
// entries.
func BM25IDF(docs, df uint64) float64 {
	return math.Log(1 + (float64(docs)-float64(df)+0.5)/(float64(df)+0.5))
}

// BM25Term is one query term's contribution to an entry's score: the term
// occurs tf times in an entry of dl terms; avgdl is the average entry
// length. An entry's score is the sum of its terms' contributions, added in
// query order. The operations are written out one by one (and the
// conversion keeps a compiler from fusing a multiply and an add), so any
// implementation doing the same IEEE operations in the same order — a SQL
// expression included — gets the same bits.
func BM25Term(idf, tf, dl, avgdl float64) float64 {
	norm := float64(bm25K1 * (1 - bm25B + bm25B*dl/avgdl))
	return idf * tf * (bm25K1 + 1) / (tf + norm)
}

// BM25SQL is BM25Term as a SQL expression over float8 operands, doing the
// same operations in the same order.
func BM25SQL(idf, tf, dl, avgdl string) string {
	return fmt.Sprintf("((%s * %s) * 2.2::float8 / (%s + 1.2::float8 * (0.25::float8 + (0.75::float8 * %s) / %s)))", idf, tf, tf, dl, avgdl)
}
