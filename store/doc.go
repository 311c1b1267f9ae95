// Package store is warden's durable state: one bbolt file holding the
// hash-chained audit log, memory (namespaced text entries with ranked
// search), runs, content-addressed artifacts and wasm tool pins.
//
// # Locking: short transactions per unit of work
//
// bbolt holds an exclusive flock on its file for as long as the database is
// open, so a process that kept it open would lock every other warden process
// out for its whole lifetime. A Store therefore opens the bbolt file lazily,
// when an operation needs it, counts the operations in flight, and closes the
// file (releasing the flock) once none has been in flight for Options.Linger.
// A long "warden run" and a "warden audit ls" in another terminal thus take
// turns: the second one either gets the file between two units of work of
// the first, or gives up after Options.Timeout with an error wrapping
// ErrLocked. Waiting is always bounded and can be cancelled with the
// operation's context; nothing ever waits forever. bbolt's own fsync is never
// disabled.
//
// Every call into bbolt runs with panics (and memory faults on the mapped
// file, see runtime/debug.SetPanicOnFault) recovered into ErrCorrupt, so a
// damaged file is reported, not a crash. All bytes handed to callers are
// copied out of their transaction.
//
// # Audit log and group commit
//
// AppendAudit appends one JSON object to a log of records chained by SHA-256:
// record n stores the hash of record n-1, and its own hash covers that link,
// its sequence number, its time and the event bytes. AppendAudit returns only
// after the bbolt transaction holding the record has been committed and
// fsynced. Concurrent callers are batched without an artificial delay: one
// committer goroutine takes everything queued while the previous commit was
// in flight, assigns consecutive sequence numbers, commits it in one bbolt
// transaction (one round of fsyncs) and wakes every caller of the batch.
// (bbolt's DB.Batch is not used: it waits MaxBatchDelay before committing.)
// The committer waits for the file before it takes the queue, so a caller
// whose context ends while another process holds the file withdraws its
// record instead of having it written later.
//
// # The head anchor
//
// A chain stored in one file cannot reveal that its tail was cut off, or that
// the whole file was replaced by an older copy. The store therefore keeps
// the head of the log, {"seq":N,"hash":"..."}, in a small file outside the
// database (Options.AnchorPath), replaced atomically: a temporary file in the
// same directory, fsynced, renamed over the old one. After each commit the
// new head goes to a background writer that holds the store's flock until
// the anchor is on disk, so the anchor's fsync overlaps the next batch's
// commit instead of adding to it, and anchors of two processes never
// interleave. VerifyAudit checks that the anchor names a record that exists
// and has that hash. Because the anchor is written after the database
// commit, it can lag behind the log (by a commit while the writer catches
// up, or after a crash between the two), which verifies; an anchor ahead of
// the log, or naming a different hash, does not.
//
// A store whose log is empty gets a "genesis" anchor (seq 0) when it is
// opened, before any record can be written, so "records but no anchor" always
// means the anchor was removed. While the anchor disagrees with the log,
// AppendAudit refuses to write (its error wraps ErrTampered): writing would
// overwrite the evidence. Reanchor accepts the current log after an owner has
// looked at it.
//
// # Derived data
//
// Three things are kept so that cost follows what is asked, not how much is
// stored: the audit index (auditindex.go: records by tool and run, outside
// the chain, so checked on every read and by VerifyAudit, never trusted),
// the memory index (memoryindex.go and store/internal/memindex: postings in
// blocks with score bounds, for an exact top-k that skips what cannot
// rank), and runs kept in parts (runparts.go: a step's write is its head
// and new elements). Each is built, caught up or rebuilt from the primary
// data when a store made before it, or written by an older warden, is
// used.
package store
