//go:build !linux

package fspath

// resolveQuick has no shortcut here: the element-by-element walk decides.
func resolveQuick(string) (string, bool) { return "", false }
