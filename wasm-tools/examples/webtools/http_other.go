//go:build !wasip1

package main

import "errors"

// httpGet is a stub in native builds (which exist only for unit tests):
// there is no host to send the request.
func httpGet(string, string) (response, error) {
	return response{}, errors.New("webtools: no wasm host (native build)")
}
