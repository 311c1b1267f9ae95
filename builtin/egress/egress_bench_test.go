package egress

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/wardenrt/warden/builtin/internal/netguard"
	"github.com/wardenrt/warden/runtime/capability"
)

type zeros struct{}

func (zeros) Read(p []byte) (int, error) {
	clear(p)
	return len(p), nil
}

// benchServer serves size bytes of zeros over HTTP (/big) and, on a second
// listener, echoes one byte per connection (raw TCP).
func benchServer(b *testing.B, size int64) (httpAddr, echoAddr string) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := size
		if r.URL.Path == "/small" {
			n = 1
		}
		w.Header().Set("Content-Length", fmt.Sprint(n))
		io.CopyN(w, zeros{}, n)
	})}
	go srv.Serve(ln)
	b.Cleanup(func() { srv.Close() })
	el, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { el.Close() })
	go func() {
		for {
			c, err := el.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				buf := make([]byte, 1)
				if _, err := c.Read(buf); err == nil {
					c.Write(buf)
				}
			}()
		}
	}()
	return ln.Addr().String(), el.Addr().String()
}

func benchProxy(b *testing.B, grants ...string) string {
	var gs []capability.Grant
	for _, g := range grants {
		gs = append(gs, capability.MustParse("net:"+g))
	}
	p := New(context.Background(), Options{Dialer: &netguard.Dialer{Grants: capability.NewSet("/ws", gs...)}})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	p.Serve(ln, "bench")
	b.Cleanup(p.Close)
	return ln.Addr().String()
}

// interleaved runs each way once per iteration, in turn (so a busy machine
// weighs on all alike), and returns each way's median duration.
func interleaved(b *testing.B, ways []func()) []time.Duration {
	ds := make([][]time.Duration, len(ways))
	for b.Loop() {
		for i, w := range ways {
			t0 := time.Now()
			w()
			ds[i] = append(ds[i], time.Since(t0))
		}
	}
	med := make([]time.Duration, len(ways))
	for i := range ds {
		slices.Sort(ds[i])
		med[i] = ds[i][len(ds[i])/2]
	}
	return med
}

// BenchmarkDownload: 100 MB over HTTP from a local server, side by side:
// directly, through the proxy's plain-HTTP forwarding, and through a
// CONNECT tunnel. Reported: each way's median throughput (MB/s) and the
// proxy's as a fraction of the direct one.
func BenchmarkDownload(b *testing.B) {
	const size = 100 << 20
	httpAddr, _ := benchServer(b, size)
	proxy := benchProxy(b, httpAddr)
	get := func(c net.Conn, req string) {
		if _, err := io.WriteString(c, req); err != nil {
			b.Fatal(err)
		}
		br := bufio.NewReaderSize(c, 64<<10)
		res, err := http.ReadResponse(br, nil)
		if err != nil {
			b.Fatal(err)
		}
		if n, err := io.Copy(io.Discard, res.Body); err != nil || n != size {
			b.Fatal(n, err)
		}
		c.Close()
	}
	dial := func(addr string) net.Conn {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			b.Fatal(err)
		}
		return c
	}
	med := interleaved(b, []func(){
		func() { get(dial(httpAddr), "GET /big HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n") },
		func() { get(dial(proxy), "GET http://"+httpAddr+"/big HTTP/1.1\r\nHost: "+httpAddr+"\r\n\r\n") },
		func() {
			c := dial(proxy)
			connect(b, c, httpAddr)
			get(c, "GET /big HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
		},
	})
	mbs := func(d time.Duration) float64 { return float64(size) / 1e6 / d.Seconds() }
	b.ReportMetric(mbs(med[0]), "direct-MB/s")
	b.ReportMetric(mbs(med[1]), "proxy-http-MB/s")
	b.ReportMetric(mbs(med[2]), "proxy-connect-MB/s")
	b.ReportMetric(mbs(med[1])/mbs(med[0]), "http/direct")
	b.ReportMetric(mbs(med[2])/mbs(med[0]), "connect/direct")
}

// connect makes a CONNECT tunnel on c and reads the proxy's answer.
func connect(b *testing.B, c net.Conn, to string) {
	fmt.Fprintf(c, "CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n", to, to)
	buf := make([]byte, 0, 64)
	one := make([]byte, 1)
	for !strings.HasSuffix(string(buf), "\r\n\r\n") {
		if _, err := c.Read(one); err != nil {
			b.Fatal(err)
		}
		buf = append(buf, one[0])
	}
	if !strings.Contains(string(buf), " 200 ") {
		b.Fatalf("%q", buf)
	}
}

// BenchmarkConnect: connection set-up, side by side — a new TCP
// connection and one byte there and back, directly and through a CONNECT
// tunnel; a small HTTP request on a new connection, directly and through
// the plain-HTTP forwarding. Reported: each way's median (µs).
func BenchmarkConnect(b *testing.B) {
	httpAddr, echo := benchServer(b, 1)
	proxy := benchProxy(b, echo, httpAddr)
	dial := func(addr string) net.Conn {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			b.Fatal(err)
		}
		return c
	}
	one := func(c net.Conn) {
		buf := []byte{1}
		if _, err := c.Write(buf); err != nil {
			b.Fatal(err)
		}
		if _, err := io.ReadFull(c, buf); err != nil {
			b.Fatal(err)
		}
		c.Close()
	}
	small := func(c net.Conn, req string) {
		io.WriteString(c, req)
		res, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			b.Fatal(err)
		}
		io.Copy(io.Discard, res.Body)
		c.Close()
	}
	med := interleaved(b, []func(){
		func() { one(dial(echo)) },
		func() { c := dial(proxy); connect(b, c, echo); one(c) },
		func() { small(dial(httpAddr), "GET /small HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n") },
		func() { small(dial(proxy), "GET http://"+httpAddr+"/small HTTP/1.1\r\nHost: "+httpAddr+"\r\n\r\n") },
	})
	for i, name := range []string{"tcp-direct-µs", "tcp-connect-µs", "http-direct-µs", "http-proxy-µs"} {
		b.ReportMetric(float64(med[i].Nanoseconds())/1000, name)
	}
}
