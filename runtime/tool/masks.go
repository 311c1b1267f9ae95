package tool

// Origin says which file a part of a tool's output was read from, so that
// a secret masked in that part can later be restored into that file.
type Origin struct {
	// Path is the file, absolute and resolved.
	Path string
	// Start and End delimit the bytes of Output read from Path; both 0:
	// all of Output and Data.
	Start, End int
}

// Sink is a part of a string argument that a tool writes into a file — or
// compares with the file's content, as modify_config's old line: a mask in
// it is restored to its original there, if the original came from that
// file (or the file holds it already).
type Sink struct {
	// Arg is the JSON pointer of the string argument: "/content",
	// "/changes/0/new".
	Arg string
	// Start and End delimit the bytes of the argument's value that land
	// in the file.
	Start, End int
	// Path is the file, absolute and resolved.
	Path string
	// Forbid lists bytes an original may not hold here: they would change
	// how the argument is read (a backslash in a shell word).
	Forbid string
}

// Sinker is implemented by the tools that write parts of their arguments
// into files (fs_write, modify_config, git_apply_patch, shell). The gate
// asks it where the masks in a call's arguments would land, before and
// again after restoring them: a restored original must land in the same
// file, in the same part of the argument (it must not end a here-document
// or a quote, or start another file of a patch).
type Sinker interface {
	Sinks(c *Call) ([]Sink, error)
}

// Vault returns the vault of the call's run, for a tool that makes calls
// of its own in the same run (a workflow it starts). It is never nil for
// a call the gate made.
func (c *Call) Vault() *Vault { return c.vault }
