// Package postgres is warden's store in a PostgreSQL database, shared by a
// fleet of warden hosts: the same contract as the bbolt store
// (store.Backend, held to it by the conformance suite in store/storetest),
// with one audit chain many hosts append to, memory, runs, artifacts, pins,
// grants, trust records and jobs every host sees, and firings of scheduled
// jobs claimed under leases.
//
// # Schema
//
// Everything lives in the PostgreSQL schema "warden", created and upgraded
// by Migrate: numbered steps, each applied once in its own transaction
// under an advisory lock, so running it again, or from several hosts at
// once, is harmless. Open refuses a database whose schema version is not
// this package's (ErrSchema). Migrate runs as the schema's owner and grants
// the role warden connects as what it needs and no more (GrantTo): it may
// add audit records but not change or remove one.
//
// # The audit chain with many writers
//
// Records are the bbolt store's, field for field (store.EncodeRecord): the
// same hash over prev, seq, time and event, the same export. An append
// locks the one row of warden.audit_head (SELECT … FOR UPDATE), so appends
// from every process of every host serialise on the head inside their
// transactions; it inserts the records after it and moves it, and commits —
// two round trips, with the time read from the database's clock, so the
// chain's times come from one clock. Concurrent callers in one process are
// committed together by one committer goroutine, as in the bbolt store.
// The database guards the chain as well: a trigger refuses any record
// that does not extend it (seq = last + 1, prev = last's hash; prev_hash
// is UNIQUE), and another refuses UPDATE, DELETE and TRUNCATE of records,
// even by a superuser (who can switch triggers off: VerifyAudit then finds
// the edit by its hash). A commit whose outcome is unknown (the connection
// broke while committing) is looked up by its first record's hash before
// anything is retried, so no record is written twice.
//
// # Anchors, one per host
//
// A chain in a database cannot show that its tail was cut or that the
// database was restored from an older copy. Each host keeps the head it
// last committed in a file of its own, outside the database
// (Options.AnchorDir/audit-<store id>.head, written after the commit,
// never moving back), and a copy in warden.audit_anchors. VerifyAudit
// checks the chain, this host's file and every host's row: each must name
// a record of the chain with that hash. While this host's anchor disagrees
// with the log, appends are refused (store.ErrTampered) until Reanchor.
// A home that has no anchor for a store yet anchors its head when it first
// opens it (after checking its host's row, if any).
//
// # Memory search
//
// Candidates come from a GIN index over a tsvector of warden's own terms
// (array_to_tsvector: the tokenizer's terms exactly, no parser, no
// stemming); the ranking is warden's BM25, computed in SQL with the same
// IEEE operations in the same order as the bbolt store (store.BM25Term,
// store.BM25SQL), from per-entry term frequencies and per-namespace
// statistics kept in the same transactions as the entries. Both backends
// return the same hits, in the same order, with the same scores.
//
// # Jobs
//
// Firings of scheduled jobs are claimed in warden.job_firings, one row per
// (job, fire): the dedupe key that lets every daemon offer the same firing
// with no leader. A claim locks the job's row with FOR UPDATE SKIP LOCKED
// (a daemon that finds another claiming moves on), and takes a lease whose
// end is on the database's clock and a fencing token from a sequence;
// renewing and finishing check the token, so a runner that lost its lease
// cannot record an outcome over the one that took the firing over.
//
// # Failures
//
// Every operation is bounded (Options.Timeout; connecting by
// connect_timeout, default 5 s; row locks by lock_timeout). Errors that
// certainly changed nothing — a request never sent, a serialization
// failure, a deadlock, a server starting up — are retried with a backoff
// until the timeout; a server that cannot be reached or does not answer
// is store.ErrUnavailable, with the URL (never its password).
package postgres
