// Package decode reads bytes that someone other than warden wrote — a
// cloned repository's policy, a module author's sidecar, a workflow file, a
// tool's JSON arguments — under a budget, strictly, and says where a
// problem is.
//
// Every loader of such bytes goes through it, so a guard added here holds
// for all of them; a loader does not keep its own copy of any of these
// checks.
//
// # The budget
//
// Nothing is read or parsed past its budget, and every limit is checked
// before the work it bounds:
//
//	size     at most Limits.MaxBytes (DefaultMaxBytes, 1 MiB, unless a loader
//	         documents another): the file's size is checked with fstat
//	         before a byte is read, and the read itself stops one byte past
//	         the cap, so a 200 MB file, /dev/zero or a file that grows while
//	         it is read costs one system call. Only regular files are read:
//	         a FIFO, a device or a directory is refused, and opening never
//	         blocks on one.
//	tokens   at most Limits.MaxTokens (DefaultMaxTokens) YAML tokens —
//	         scalars, indicators, comments — counted by a scan of the bytes
//	         before the YAML library sees them. The library keeps several
//	         hundred bytes per token, so this bounds its memory and time.
//	depth    at most Limits.MaxDepth (DefaultMaxDepth) levels of nesting,
//	         block and flow, YAML and JSON alike, found by the same scan
//	         (the library's cost grows with the square of the depth: 10,000
//	         levels of "- " took 170 MB).
//	keys     at most Limits.MaxKeys (DefaultMaxKeys) keys in one block
//	         mapping (the library's cost grows with the square of a block
//	         mapping's width: 33,000 keys took 4 s).
//
// # Strictness
//
// YAML anchors (&name), aliases (*name), merge keys (<<) and tags (!name)
// are refused with their line and column, before anything is parsed or
// expanded: an alias makes a small file stand for a huge value ("billion
// laughs"), a tag alone on its line nests the next line under it, and
// nothing warden reads needs either — write the value out. Duplicate keys, unknown fields, a second
// document, wrong types and invalid UTF-8 are errors. JSON is decoded with
// the same rules: no duplicate keys at any depth, valid UTF-8, one value.
//
// Every error is an [*Error] with the source, line and column (0 when the
// problem is the file as a whole); [errors.Is] tells a refusal for size
// (bytes, tokens, keys: [ErrTooLarge]) from a refused construct or shape
// (an alias, nesting, a duplicate key, bad syntax: [ErrInvalid]).
package decode
