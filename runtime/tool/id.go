package tool

import (
	"crypto/rand"
	"encoding/binary"
	"time"
)

const crockford = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"

// NewID returns a sortable identifier: 48 bits of milliseconds since the
// epoch and 80 random bits in Crockford base32 (26 characters, ULID layout),
// so ids made later sort after earlier ones.
func NewID() string { return newIDAt(time.Now()) }

func newIDAt(t time.Time) string {
	var b [16]byte
	binary.BigEndian.PutUint64(b[:8], uint64(t.UnixMilli())<<16)
	_, _ = rand.Read(b[6:]) // crypto/rand.Read never fails on supported platforms
	var out [26]byte
	// 128 bits → 26 base32 digits, most significant first (2 leading pad bits).
	hi := binary.BigEndian.Uint64(b[:8])
	lo := binary.BigEndian.Uint64(b[8:])
	for i := 25; i >= 0; i-- {
		out[i] = crockford[lo&31]
		lo = lo>>5 | hi<<59
		hi >>= 5
	}
	return string(out[:])
}
