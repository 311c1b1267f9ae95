package policy

import (
	"slices"

	"github.com/wardenrt/warden/runtime/pathrule"
)

// pathRules compiles the policy's protect: and hide: lists.
// An untrusted workspace policy's lists apply too (they only narrow), and
// extraHide adds paths the owner's own setup hides (warden's home).
func (p *Policy) PathRules(extraHide ...string) (protect, hide pathrule.List) {
	pr, hd := slices.Clone(p.Protect), slices.Clone(p.Hide)
	for _, n := range p.narrowers {
		pr, hd = append(pr, n.Protect...), append(hd, n.Hide...)
	}
	return pathrule.New(pr), pathrule.New(hd).Join(pathrule.Literal(extraHide...))
}
