package lazyre

import (
	"sync"
	"testing"
)

// TestCompiledOnce: the pattern is compiled on first use, once, also when
// first used from several goroutines, and matches as regexp does.
func TestCompiledOnce(t *testing.T) {
	r := New(`^a(b+)c$`)
	if r.re != nil {
		t.Fatal("compiled before use")
	}
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() { defer wg.Done(); _ = r.MatchString("abbc") }()
	}
	wg.Wait()
	first := r.Get()
	if r.Get() != first || !r.MatchString("abc") || r.MatchString("ac") {
		t.Fatal("not one compiled pattern")
	}
	if m := r.FindStringSubmatch("abbbc"); len(m) != 2 || m[1] != "bbb" {
		t.Fatalf("%q", m)
	}
}

// TestBadPatternPanicsOnUse: a bad pattern panics where it is first used.
func TestBadPatternPanicsOnUse(t *testing.T) {
	r := New(`(`)
	defer func() {
		if recover() == nil {
			t.Fatal("no panic")
		}
	}()
	r.MatchString("x")
}
