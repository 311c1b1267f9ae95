package fspath

import (
	"strings"
	"testing"
)

// TestQuoteNeverCutsASecret: a long path quoted in a message is cut before
// a secret it would cut in two — ghp_AbCdEfGhIjKlMnO… is no token the
// gate would know to mask (secrets at scale, cmd/warden).
func TestQuoteNeverCutsASecret(t *testing.T) {
	const token = "ghp_AbCdEfGhIjKlMnOpQrStUvWxYz0123456789"
	p := "missing/" + strings.Repeat("0", 170) + "/T=" + token
	q := Quote(p)
	if strings.Contains(q, "ghp_") || !strings.HasSuffix(q, `/T="…`) {
		t.Fatalf("Quote = %s", q)
	}
	if q := Quote("short/" + token); q != `"short/`+token+`"` {
		t.Fatalf("a short path: %s", q)
	}
}
