module github.com/wardenrt/warden/wasm-tools

go 1.25.0

require (
	github.com/extism/go-pdk v1.1.3
	github.com/goccy/go-yaml v1.19.2
	github.com/tetratelabs/wazero v1.12.0
)

require golang.org/x/sys v0.44.0 // indirect
