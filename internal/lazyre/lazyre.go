// Package lazyre is a regular expression compiled on its first use rather
// than when its package is initialised: a package-level pattern then costs
// nothing to a process that never matches it (`warden version`, `--help`,
// most commands), where regexp.MustCompile in a var costs every process.
// A bad pattern still panics, on its first use; every pattern is used in
// the tests.
package lazyre

import (
	"regexp"
	"sync"
)

// Regexp is a pattern compiled on first use. It is safe for concurrent use.
type Regexp struct {
	expr string
	once sync.Once
	re   *regexp.Regexp
}

// New returns expr, to be compiled on first use.
func New(expr string) *Regexp { return &Regexp{expr: expr} }

// Get returns the compiled pattern.
func (r *Regexp) Get() *regexp.Regexp {
	r.once.Do(func() { r.re = regexp.MustCompile(r.expr) })
	return r.re
}

func (r *Regexp) String() string                         { return r.expr }
func (r *Regexp) MatchString(s string) bool              { return r.Get().MatchString(s) }
func (r *Regexp) FindStringIndex(s string) []int         { return r.Get().FindStringIndex(s) }
func (r *Regexp) FindStringSubmatch(s string) []string   { return r.Get().FindStringSubmatch(s) }
func (r *Regexp) FindStringSubmatchIndex(s string) []int { return r.Get().FindStringSubmatchIndex(s) }
func (r *Regexp) FindAllStringIndex(s string, n int) [][]int {
	return r.Get().FindAllStringIndex(s, n)
}
func (r *Regexp) FindAllStringSubmatchIndex(s string, n int) [][]int {
	return r.Get().FindAllStringSubmatchIndex(s, n)
}
func (r *Regexp) FindAllStringSubmatch(s string, n int) [][]string {
	return r.Get().FindAllStringSubmatch(s, n)
}
func (r *Regexp) ReplaceAllString(src, repl string) string {
	return r.Get().ReplaceAllString(src, repl)
}
func (r *Regexp) ReplaceAllStringFunc(src string, repl func(string) string) string {
	return r.Get().ReplaceAllStringFunc(src, repl)
}
