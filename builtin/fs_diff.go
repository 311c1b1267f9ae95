package builtin

import (
	"fmt"
	"slices"
	"strings"
)

// A small unified line diff for fs_write's preview: Myers' O(ND) algorithm
// on the lines between the common prefix and suffix. When the two differ by
// more than fsDiffMaxEdits lines it gives up on a minimal script and shows
// the middle as removed then added — still a correct diff, only longer.

const (
	fsDiffContext  = 3
	fsDiffMaxEdits = 1000
)

type fsDiffOp struct {
	kind byte // ' ', '-', '+'
	line string
}

// fsSplitLines splits s into lines that keep their "\n" (the last may lack it).
func fsSplitLines(s string) []string {
	if s == "" {
		return nil
	}
	lines := strings.SplitAfter(s, "\n")
	if lines[len(lines)-1] == "" {
		lines = lines[:len(lines)-1]
	}
	return lines
}

// fsLineDiff returns an edit script turning a into b.
func fsLineDiff(a, b []string) []fsDiffOp {
	pre := 0
	for pre < len(a) && pre < len(b) && a[pre] == b[pre] {
		pre++
	}
	suf := 0
	for suf < len(a)-pre && suf < len(b)-pre && a[len(a)-1-suf] == b[len(b)-1-suf] {
		suf++
	}
	ops := make([]fsDiffOp, 0, len(a)+len(b)-pre-suf)
	for _, l := range a[:pre] {
		ops = append(ops, fsDiffOp{' ', l})
	}
	ma, mb := a[pre:len(a)-suf], b[pre:len(b)-suf]
	mid, ok := fsMyers(ma, mb, fsDiffMaxEdits)
	if !ok {
		mid = mid[:0]
		for _, l := range ma {
			mid = append(mid, fsDiffOp{'-', l})
		}
		for _, l := range mb {
			mid = append(mid, fsDiffOp{'+', l})
		}
	}
	ops = append(ops, mid...)
	for _, l := range a[len(a)-suf:] {
		ops = append(ops, fsDiffOp{' ', l})
	}
	return ops
}

// fsMyers is Myers' greedy shortest edit script, keeping the frontier of
// each round to walk back. It reports false when more than maxD edits are
// needed.
func fsMyers(a, b []string, maxD int) ([]fsDiffOp, bool) {
	n, m := len(a), len(b)
	if n+m == 0 {
		return nil, true
	}
	maxD = min(maxD, n+m)
	off := maxD + 1
	v := make([]int, 2*maxD+3)
	var trace [][]int // trace[d][k+d+1] is v[k] before round d
	for d := 0; d <= maxD; d++ {
		trace = append(trace, slices.Clone(v[off-d-1:off+d+2]))
		for k := -d; k <= d; k += 2 {
			var x int
			if k == -d || (k != d && v[off+k-1] < v[off+k+1]) {
				x = v[off+k+1]
			} else {
				x = v[off+k-1] + 1
			}
			y := x - k
			for x < n && y < m && a[x] == b[y] {
				x++
				y++
			}
			v[off+k] = x
			if x >= n && y >= m {
				return fsBacktrack(a, b, trace), true
			}
		}
	}
	return nil, false
}

func fsBacktrack(a, b []string, trace [][]int) []fsDiffOp {
	x, y := len(a), len(b)
	var rev []fsDiffOp
	for d := len(trace) - 1; d >= 0; d-- {
		t := trace[d]
		at := func(k int) int { return t[k+d+1] }
		k := x - y
		pk := k - 1
		if k == -d || (k != d && at(k-1) < at(k+1)) {
			pk = k + 1
		}
		px := at(pk)
		py := px - pk
		for x > px && y > py {
			rev = append(rev, fsDiffOp{' ', a[x-1]})
			x--
			y--
		}
		if d > 0 {
			if x == px {
				rev = append(rev, fsDiffOp{'+', b[y-1]})
				y--
			} else {
				rev = append(rev, fsDiffOp{'-', a[x-1]})
				x--
			}
		}
	}
	slices.Reverse(rev)
	return rev
}

// fsUnifiedDiff renders the unified diff (3 lines of context) of old → new,
// cut at about max bytes with a marker; it reports whether it was cut.
func fsUnifiedDiff(oldLabel, newLabel, old, new string, limit int) (string, bool) {
	if old == new {
		return "(no changes)\n", false
	}
	ops := fsLineDiff(fsSplitLines(old), fsSplitLines(new))
	// oldAt[i], newAt[i]: lines of each side before ops[i].
	oldAt := make([]int, len(ops)+1)
	newAt := make([]int, len(ops)+1)
	for i, op := range ops {
		oldAt[i+1], newAt[i+1] = oldAt[i], newAt[i]
		if op.kind != '+' {
			oldAt[i+1]++
		}
		if op.kind != '-' {
			newAt[i+1]++
		}
	}
	var sb strings.Builder
	sb.WriteString("--- " + oldLabel + "\n+++ " + newLabel + "\n")
	for i := 0; i < len(ops); {
		for i < len(ops) && ops[i].kind == ' ' {
			i++
		}
		if i == len(ops) {
			break
		}
		start := fsMax0(i - fsDiffContext)
		j := i
		for {
			for j < len(ops) && ops[j].kind != ' ' {
				j++
			}
			k := j
			for k < len(ops) && ops[k].kind == ' ' {
				k++
			}
			if k < len(ops) && k-j <= 2*fsDiffContext {
				j = k
				continue
			}
			break
		}
		end := min(j+fsDiffContext, len(ops))
		oldN, newN := oldAt[end]-oldAt[start], newAt[end]-newAt[start]
		oldS, newS := oldAt[start], newAt[start]
		if oldN > 0 {
			oldS++
		}
		if newN > 0 {
			newS++
		}
		fmt.Fprintf(&sb, "@@ -%d,%d +%d,%d @@\n", oldS, oldN, newS, newN)
		for _, op := range ops[start:end] {
			sb.WriteByte(op.kind)
			sb.WriteString(op.line)
			if !strings.HasSuffix(op.line, "\n") {
				sb.WriteString("\n\\ No newline at end of file\n")
			}
		}
		i = end
	}
	s := sb.String()
	if len(s) <= limit {
		return s, false
	}
	cut := strings.LastIndexByte(s[:limit], '\n') + 1
	return s[:cut] + fmt.Sprintf("… [diff truncated: %d of %d bytes shown]\n", cut, len(s)), true
}

func fsMax0(n int) int {
	if n < 0 {
		return 0
	}
	return n
}
