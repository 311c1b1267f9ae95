package tool

import (
	"testing"
	"time"
)

func timeAt(ms int64) time.Time { return time.UnixMilli(1_700_000_000_000 + ms) }

func TestNewIDSorts(t *testing.T) {
	a := NewID()
	b := NewID()
	if len(a) != 26 || len(b) != 26 {
		t.Fatalf("%q %q", a, b)
	}
	for i := 0; i < 1000; i++ {
		x, y := newIDAt(timeAt(int64(i))), newIDAt(timeAt(int64(i+1)))
		if x >= y {
			t.Fatalf("ids do not sort: %s >= %s", x, y)
		}
	}
}
