package jsonvalue

import (
	"hash/maphash"
	"testing"
)

func TestHashEquals(t *testing.T) {
	tests := []struct {
		v1, v2 any
		want   bool
	}{
		{1.0, 1, true},
		{-1.0, -1, true},
	}
	hash := new(maphash.Hash)
	for _, test := range tests {
		hash.Reset()
		writeHash(test.v1, hash)
		h1 := hash.Sum64()
		hash.Reset()
		writeHash(test.v2, hash)
		h2 := hash.Sum64()
		got := h1 == h2
		if got != test.want {
			t.Errorf("hashEquals(%v, %v): got %v, want %v", test.v1, test.v2, got, test.want)
		}
	}
}
