package decode

import (
	"errors"
	"fmt"
)

// Kinds of refusal, for errors.Is on an [*Error].
var (
	// ErrTooLarge: over a size budget (bytes, tokens, keys in a mapping).
	ErrTooLarge = errors.New("over the decoding budget")
	// ErrInvalid: a refused construct or shape (an alias, nesting past
	// the limit, a duplicate or unknown key, a second document, not a
	// regular file) or bytes that do not parse.
	ErrInvalid = errors.New("refused")
)

// Error is a problem in bytes from outside, located by line and column
// where known (Line 0: the file as a whole). Loaders use it for the
// problems they find in the decoded values too, with Err nil.
type Error struct {
	Source       string
	Line, Column int
	Message      string
	// Err is ErrTooLarge or ErrInvalid for the decoder's own refusals.
	Err error
}

func (e *Error) Error() string {
	if e.Line > 0 {
		return fmt.Sprintf("%s:%d:%d: %s", e.Source, e.Line, e.Column, e.Message)
	}
	return fmt.Sprintf("%s: %s", e.Source, e.Message)
}

// Unwrap returns the kind of refusal (nil for a loader's own checks).
func (e *Error) Unwrap() error { return e.Err }

func tooLarge(source string, line, col int, format string, args ...any) *Error {
	return &Error{Source: source, Line: line, Column: col, Message: fmt.Sprintf(format, args...), Err: ErrTooLarge}
}

func invalid(source string, line, col int, format string, args ...any) *Error {
	return &Error{Source: source, Line: line, Column: col, Message: fmt.Sprintf(format, args...), Err: ErrInvalid}
}

// Limits bound what one decode may cost. Zero fields take the defaults.
type Limits struct {
	MaxBytes  int64 // DefaultMaxBytes
	MaxTokens int   // DefaultMaxTokens (YAML)
	MaxDepth  int   // DefaultMaxDepth
	MaxKeys   int   // DefaultMaxKeys (one YAML block mapping)
	// Pool, when set, is a budget of YAML tokens shared by several
	// decodes — a file and the files it includes — so that many files,
	// each within MaxTokens, cannot add up to an unbounded parse: a
	// decode's tokens are taken from *Pool, and a decode that would take
	// more than is left is refused before anything is parsed. Not safe
	// for concurrent decodes.
	Pool *int
}

// Defaults of Limits.
const (
	DefaultMaxBytes  = 1 << 20
	DefaultMaxTokens = 20_000
	DefaultMaxDepth  = 64
	DefaultMaxKeys   = 1_000
)

func (l *Limits) withDefaults() Limits {
	var o Limits
	if l != nil {
		o = *l
	}
	if o.MaxBytes <= 0 {
		o.MaxBytes = DefaultMaxBytes
	}
	if o.MaxTokens <= 0 {
		o.MaxTokens = DefaultMaxTokens
	}
	if o.MaxDepth <= 0 {
		o.MaxDepth = DefaultMaxDepth
	}
	if o.MaxKeys <= 0 {
		o.MaxKeys = DefaultMaxKeys
	}
	return o
}

// sizeText says a byte count for a person: 1 MiB, 64 KiB, 1500 bytes.
func sizeText(n int64) string {
	switch {
	case n >= 1<<20 && n%(1<<20) == 0:
		return fmt.Sprintf("%d MiB", n>>20)
	case n >= 1<<10 && n%(1<<10) == 0:
		return fmt.Sprintf("%d KiB", n>>10)
	}
	return fmt.Sprintf("%d bytes", n)
}
