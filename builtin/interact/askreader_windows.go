package interact

import (
	"context"
	"errors"
)

// errAskWoken is returned by askReader when the call's context ended.
var errAskWoken = errors.New("interrupted")

// askReader: on Windows, asking on the console is not available (the
// reader that can be woken when the call ends polls the terminal, which
// is unix's).
type askReader struct{}

func newAskReader(context.Context, int) (*askReader, error) {
	return nil, errors.New("asking the user on the console is not available on windows")
}

func (r *askReader) Read([]byte) (int, error) { return 0, errAskWoken }
func (r *askReader) close()                   {}
