//go:build wasip1

// Command abiprobe is a servlet that imports, by hand and without any PDK,
// every function of the Extism kernel (extism:host/env) that published
// plugins import, and the WASI functions TinyGo, Rust and Zig builds
// import (args, environ, clock, random, fd_write, proc_exit, sched_yield,
// poll_oneoff), and calls each: its abi_probe tool reports what each gave,
// so warden's tests can check that all are present and that none gives
// ambient authority (no arguments, no environment, stdout captured).
// abi_exit calls proc_exit in the middle of a call.
package main

import (
	"encoding/binary"
	"encoding/json"
	"time"
	"unsafe"
)

func main() {}

// The Extism kernel.
//
//go:wasmimport extism:host/env alloc
func kAlloc(n uint64) uint64

//go:wasmimport extism:host/env free
func kFree(off uint64)

//go:wasmimport extism:host/env length
func kLength(off uint64) uint64

//go:wasmimport extism:host/env length_unsafe
func kLengthUnsafe(off uint64) uint64

//go:wasmimport extism:host/env load_u8
func kLoadU8(off uint64) uint32

//go:wasmimport extism:host/env load_u64
func kLoadU64(off uint64) uint64

//go:wasmimport extism:host/env store_u8
func kStoreU8(off uint64, v uint32)

//go:wasmimport extism:host/env store_u64
func kStoreU64(off uint64, v uint64)

//go:wasmimport extism:host/env input_length
func kInputLength() uint64

//go:wasmimport extism:host/env input_offset
func kInputOffset() uint64

//go:wasmimport extism:host/env input_load_u8
func kInputLoadU8(off uint64) uint32

//go:wasmimport extism:host/env input_load_u64
func kInputLoadU64(off uint64) uint64

//go:wasmimport extism:host/env output_set
func kOutputSet(off, n uint64)

//go:wasmimport extism:host/env output_length
func kOutputLength() uint64

//go:wasmimport extism:host/env output_offset
func kOutputOffset() uint64

//go:wasmimport extism:host/env error_set
func kErrorSet(off uint64)

//go:wasmimport extism:host/env error_get
func kErrorGet() uint64

//go:wasmimport extism:host/env reset
func kReset()

//go:wasmimport extism:host/env memory_bytes
func kMemoryBytes() uint64

//go:wasmimport extism:host/env config_get
func kConfigGet(off uint64) uint64

//go:wasmimport extism:host/env var_get
func kVarGet(off uint64) uint64

//go:wasmimport extism:host/env var_set
func kVarSet(k, v uint64)

//go:wasmimport extism:host/env http_request
func kHTTPRequest(req, body uint64) uint64

//go:wasmimport extism:host/env http_status_code
func kHTTPStatusCode() int32

//go:wasmimport extism:host/env http_headers
func kHTTPHeaders() uint64

//go:wasmimport extism:host/env get_log_level
func kGetLogLevel() int32

//go:wasmimport extism:host/env log_trace
func kLogTrace(off uint64)

//go:wasmimport extism:host/env log_debug
func kLogDebug(off uint64)

//go:wasmimport extism:host/env log_info
func kLogInfo(off uint64)

//go:wasmimport extism:host/env log_warn
func kLogWarn(off uint64)

//go:wasmimport extism:host/env log_error
func kLogError(off uint64)

// WASI.
//
//go:wasmimport wasi_snapshot_preview1 args_sizes_get
func wArgsSizesGet(argc, bufSize unsafe.Pointer) uint32

//go:wasmimport wasi_snapshot_preview1 args_get
func wArgsGet(argv, buf unsafe.Pointer) uint32

//go:wasmimport wasi_snapshot_preview1 environ_sizes_get
func wEnvironSizesGet(n, bufSize unsafe.Pointer) uint32

//go:wasmimport wasi_snapshot_preview1 environ_get
func wEnvironGet(env, buf unsafe.Pointer) uint32

//go:wasmimport wasi_snapshot_preview1 clock_time_get
func wClockTimeGet(id uint32, precision uint64, t unsafe.Pointer) uint32

//go:wasmimport wasi_snapshot_preview1 random_get
func wRandomGet(buf unsafe.Pointer, n uint32) uint32

//go:wasmimport wasi_snapshot_preview1 fd_write
func wFdWrite(fd uint32, iovs unsafe.Pointer, n uint32, written unsafe.Pointer) uint32

//go:wasmimport wasi_snapshot_preview1 proc_exit
func wProcExit(code uint32)

//go:wasmimport wasi_snapshot_preview1 sched_yield
func wSchedYield() uint32

//go:wasmimport wasi_snapshot_preview1 poll_oneoff
func wPollOneoff(in, out unsafe.Pointer, n uint32, nevents unsafe.Pointer) uint32

// Kernel memory helpers, written with the kernel functions alone.

func store(b []byte) uint64 {
	off := kAlloc(uint64(len(b)))
	i := 0
	for ; i+8 <= len(b); i += 8 {
		kStoreU64(off+uint64(i), binary.LittleEndian.Uint64(b[i:]))
	}
	for ; i < len(b); i++ {
		kStoreU8(off+uint64(i), uint32(b[i]))
	}
	return off
}

func load(off uint64) []byte {
	if off == 0 {
		return nil
	}
	n := kLength(off)
	b := make([]byte, n)
	i := uint64(0)
	for ; i+8 <= n; i += 8 {
		binary.LittleEndian.PutUint64(b[i:], kLoadU64(off+i))
	}
	for ; i < n; i++ {
		b[i] = byte(kLoadU8(off + i))
	}
	return b
}

func input() []byte {
	n := kInputLength()
	b := make([]byte, n)
	i := uint64(0)
	for ; i+8 <= n; i += 8 {
		binary.LittleEndian.PutUint64(b[i:], kInputLoadU64(i))
	}
	for ; i < n; i++ {
		b[i] = byte(kInputLoadU8(i))
	}
	return b
}

func output(b []byte) int32 {
	off := store(b)
	kOutputSet(off, uint64(len(b)))
	return 0
}

func result(text string, isError bool) int32 {
	b, _ := json.Marshal(map[string]any{"content": []map[string]string{{"type": "text", "text": text}}, "isError": isError})
	return output(b)
}

const describeJSON = `{"tools":[
 {"name":"abi_probe","description":"Call every Extism kernel and WASI function and report what each gave.",
  "inputSchema":{"type":"object","properties":{"url":{"type":"string","description":"fetched with http_request when given"}}}},
 {"name":"abi_exit","description":"Call WASI proc_exit with the code given, in the middle of a call.",
  "inputSchema":{"type":"object","properties":{"code":{"type":"integer"}},"required":["code"]}}
]}`

//go:wasmexport describe
func describe() int32 { return output([]byte(describeJSON)) }

//go:wasmexport call
func call() int32 {
	in := input()
	r := map[string]any{"input_offset_set": kInputOffset() != 0, "input_length": kInputLength()}
	kReset() // the kernel's blocks (the input block too) are gone; in is a copy
	var req struct {
		Params struct {
			Name      string `json:"name"`
			Arguments struct {
				URL  string `json:"url"`
				Code uint32 `json:"code"`
			} `json:"arguments"`
		} `json:"params"`
	}
	if err := json.Unmarshal(in, &req); err != nil {
		kErrorSet(store([]byte("bad call: " + err.Error())))
		return 1
	}
	if req.Params.Name == "abi_exit" {
		wProcExit(req.Params.Arguments.Code)
		return 0
	}

	// Memory: alloc, length, length_unsafe, load/store, free, memory_bytes.
	off := store([]byte("0123456789"))
	r["length"] = kLength(off)
	r["length_unsafe"] = kLengthUnsafe(off)
	r["load_store"] = string(load(off)) == "0123456789"
	kFree(off)
	r["memory_bytes"] = kMemoryBytes()

	// error_set / error_get, then cleared.
	e := store([]byte("probe error"))
	kErrorSet(e)
	r["error_roundtrip"] = string(load(kErrorGet())) == "probe error"
	kErrorSet(0)

	// Config and vars.
	r["config_greeting"] = string(load(kConfigGet(store([]byte("greeting")))))
	r["config_missing"] = kConfigGet(store([]byte("no-such-key"))) == 0
	prev := string(load(kVarGet(store([]byte("calls")))))
	kVarSet(store([]byte("calls")), store([]byte(prev+"x")))
	r["var_calls"] = string(load(kVarGet(store([]byte("calls")))))

	// Logs at every level.
	r["log_level"] = kGetLogLevel()
	kLogTrace(store([]byte("abiprobe trace")))
	kLogDebug(store([]byte("abiprobe debug")))
	kLogInfo(store([]byte("abiprobe info")))
	kLogWarn(store([]byte("abiprobe warn")))
	kLogError(store([]byte("abiprobe error")))

	// HTTP through the host.
	if u := req.Params.Arguments.URL; u != "" {
		hreq, _ := json.Marshal(map[string]any{"url": u, "method": "GET", "headers": map[string]string{"X-Probe": "1"}})
		body := load(kHTTPRequest(store(hreq), 0))
		r["http_status"] = kHTTPStatusCode()
		r["http_body"] = string(body)
		var hs map[string]string
		_ = json.Unmarshal(load(kHTTPHeaders()), &hs)
		r["http_header"] = hs["x-probe-reply"]
	}

	// WASI: nothing of the host's arguments or environment.
	var argc, argvSize, envc, envSize uint32
	r["args_sizes_errno"] = wArgsSizesGet(unsafe.Pointer(&argc), unsafe.Pointer(&argvSize))
	r["args"] = argc
	var argvBuf [1]uint32
	var argBuf [1]byte
	r["args_get_errno"] = wArgsGet(unsafe.Pointer(&argvBuf[0]), unsafe.Pointer(&argBuf[0]))
	r["environ_sizes_errno"] = wEnvironSizesGet(unsafe.Pointer(&envc), unsafe.Pointer(&envSize))
	r["environ"] = envc
	r["environ_get_errno"] = wEnvironGet(unsafe.Pointer(&argvBuf[0]), unsafe.Pointer(&argBuf[0]))
	var now uint64
	r["clock_errno"] = wClockTimeGet(0, 1, unsafe.Pointer(&now))
	r["clock_year"] = time.Unix(0, int64(now)).UTC().Year()
	var a, b [16]byte
	wRandomGet(unsafe.Pointer(&a[0]), 16)
	r["random_errno"] = wRandomGet(unsafe.Pointer(&b[0]), 16)
	r["random_differs"] = a != b
	msg := []byte("abiprobe stdout\n")
	iov := [2]uint32{uint32(uintptr(unsafe.Pointer(&msg[0]))), uint32(len(msg))}
	var written uint32
	r["fd_write_errno"] = wFdWrite(1, unsafe.Pointer(&iov[0]), 1, unsafe.Pointer(&written))
	r["fd_write"] = written
	r["sched_yield_errno"] = wSchedYield()
	var sub [48]byte
	binary.LittleEndian.PutUint64(sub[0:], 7)  // userdata
	sub[8] = 0                                 // clock
	binary.LittleEndian.PutUint32(sub[16:], 1) // monotonic
	binary.LittleEndian.PutUint64(sub[24:], uint64(2*time.Millisecond))
	var ev [32]byte
	var nev uint32
	start := time.Now()
	r["poll_oneoff_errno"] = wPollOneoff(unsafe.Pointer(&sub[0]), unsafe.Pointer(&ev[0]), 1, unsafe.Pointer(&nev))
	r["poll_oneoff_slept"] = time.Since(start) >= 2*time.Millisecond && nev == 1

	out, _ := json.Marshal(r)
	res := result(string(out), false)
	r["output_length_ok"] = kOutputLength() > 0 && kOutputOffset() != 0
	if !r["output_length_ok"].(bool) {
		return result(`{"output_length_ok":false}`, true)
	}
	return res
}
