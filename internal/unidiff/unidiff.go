// Package unidiff renders unified line diffs (fs_write's preview, a policy
// trusted again): Myers' O(ND) algorithm on the lines between the common
// prefix and suffix. When the two differ by more than maxEdits lines it
// gives up on a minimal script and shows the middle as removed then added —
// still a correct diff, only longer.
package unidiff

import (
	"fmt"
	"slices"
	"strings"
)

const (
	contextLines = 3
	maxEdits     = 1000
)

type diffOp struct {
	kind byte // ' ', '-', '+'
	line string
}

// SplitLines splits s into lines that keep their "\n" (the last may lack it).
func SplitLines(s string) []string {
	if s == "" {
		return nil
	}
	lines := strings.SplitAfter(s, "\n")
	if lines[len(lines)-1] == "" {
		lines = lines[:len(lines)-1]
	}
	return lines
}

// lineDiff returns an edit script turning a into b.
func lineDiff(a, b []string) []diffOp {
	pre := 0
	for pre < len(a) && pre < len(b) && a[pre] == b[pre] {
		pre++
	}
	suf := 0
	for suf < len(a)-pre && suf < len(b)-pre && a[len(a)-1-suf] == b[len(b)-1-suf] {
		suf++
	}
	ops := make([]diffOp, 0, len(a)+len(b)-pre-suf)
	for _, l := range a[:pre] {
		ops = append(ops, diffOp{' ', l})
	}
	ma, mb := a[pre:len(a)-suf], b[pre:len(b)-suf]
	mid, ok := myers(ma, mb, maxEdits)
	if !ok {
		mid = mid[:0]
		for _, l := range ma {
			mid = append(mid, diffOp{'-', l})
		}
		for _, l := range mb {
			mid = append(mid, diffOp{'+', l})
		}
	}
	ops = append(ops, mid...)
	for _, l := range a[len(a)-suf:] {
		ops = append(ops, diffOp{' ', l})
	}
	return ops
}

// myers is Myers' greedy shortest edit script, keeping the frontier of
// each round to walk back. It reports false when more than maxD edits are
// needed.
func myers(a, b []string, maxD int) ([]diffOp, bool) {
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
				return backtrack(a, b, trace), true
			}
		}
	}
	return nil, false
}

func backtrack(a, b []string, trace [][]int) []diffOp {
	x, y := len(a), len(b)
	var rev []diffOp
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
			rev = append(rev, diffOp{' ', a[x-1]})
			x--
			y--
		}
		if d > 0 {
			if x == px {
				rev = append(rev, diffOp{'+', b[y-1]})
				y--
			} else {
				rev = append(rev, diffOp{'-', a[x-1]})
				x--
			}
		}
	}
	slices.Reverse(rev)
	return rev
}

// Unified renders the unified diff (3 lines of context) of old → new,
// cut at about max bytes with a marker; it reports whether it was cut.
func Unified(oldLabel, newLabel, old, new string, limit int) (string, bool) {
	if old == new {
		return "(no changes)\n", false
	}
	ops := lineDiff(SplitLines(old), SplitLines(new))
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
		start := max0(i - contextLines)
		j := i
		for {
			for j < len(ops) && ops[j].kind != ' ' {
				j++
			}
			k := j
			for k < len(ops) && ops[k].kind == ' ' {
				k++
			}
			if k < len(ops) && k-j <= 2*contextLines {
				j = k
				continue
			}
			break
		}
		end := min(j+contextLines, len(ops))
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

func max0(n int) int {
	if n < 0 {
		return 0
	}
	return n
}
