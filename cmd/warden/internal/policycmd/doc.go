// Package policycmd holds `warden policy` (check, explain, trust, test,
// publish) and `warden grant` (grants that expire).
package policycmd
