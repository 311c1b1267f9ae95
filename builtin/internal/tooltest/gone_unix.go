//go:build unix

package tooltest

import (
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// AssertGone fails the test unless every process whose PID pidfile lists
// (one a line) is gone within 2 s.
func AssertGone(t *testing.T, pidfile string) {
	t.Helper()
	data, err := os.ReadFile(pidfile)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range strings.Fields(string(data)) {
		pid, _ := strconv.Atoi(f)
		deadline := time.Now().Add(2 * time.Second)
		for {
			// Signal 0 probes; a zombie awaiting its reaper (init) counts as gone.
			if err := syscall.Kill(pid, 0); err != nil || isZombie(pid) {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("process %d is still alive", pid)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
}

func isZombie(pid int) bool {
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return true
	}
	s := string(data)
	i := strings.LastIndexByte(s, ')')
	return i >= 0 && i+2 < len(s) && s[i+2] == 'Z'
}
