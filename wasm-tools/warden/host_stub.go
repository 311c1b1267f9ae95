//go:build !wasip1

package warden

// This file is a STUB for native (non-wasip1) builds. It exists only so the
// JSON helpers of this package can be unit tested with `go test` on the
// build machine; there is no host here, and every host operation fails with
// ErrNotWasm (output and errors are dropped). Real tools are built with
// GOOS=wasip1 GOARCH=wasm, which uses host_wasip1.go instead.

func roundTrip([]byte) (Envelope, error) { return Envelope{}, ErrNotWasm }

func requestBuffer() []byte { return nil }

func readInput() ([]byte, error) { return nil, ErrNotWasm }

func writeOutput([]byte) {}

func setError(string) {}

func config(string) (string, bool) { return "", false }
