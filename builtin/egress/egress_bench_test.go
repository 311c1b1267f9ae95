package egress

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"

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

// BenchmarkDownload: 100 MB over HTTP from a local server, directly and
// through the proxy's plain-HTTP forwarding, and over a CONNECT tunnel
// (raw bytes after the tunnel is made) — the throughput side by side.
func BenchmarkDownload(b *testing.B) {
	const size = 100 << 20
	httpAddr, _ := benchServer(b, size)
	proxy := benchProxy(b, httpAddr)
	get := func(b *testing.B, c net.Conn, req string) {
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
	b.Run("direct", func(b *testing.B) {
		b.SetBytes(size)
		for b.Loop() {
			c, err := net.Dial("tcp", httpAddr)
			if err != nil {
				b.Fatal(err)
			}
			get(b, c, "GET /big HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
		}
	})
	b.Run("proxy-http", func(b *testing.B) {
		b.SetBytes(size)
		for b.Loop() {
			c, err := net.Dial("tcp", proxy)
			if err != nil {
				b.Fatal(err)
			}
			get(b, c, "GET http://"+httpAddr+"/big HTTP/1.1\r\nHost: "+httpAddr+"\r\n\r\n")
		}
	})
	b.Run("proxy-connect", func(b *testing.B) {
		b.SetBytes(size)
		for b.Loop() {
			c, err := net.Dial("tcp", proxy)
			if err != nil {
				b.Fatal(err)
			}
			connect(b, c, httpAddr)
			get(b, c, "GET /big HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
		}
	})
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

// BenchmarkConnect: a new connection and one byte there and back, directly
// and through a CONNECT tunnel; and a small HTTP request, directly and
// through the plain-HTTP forwarding.
func BenchmarkConnect(b *testing.B) {
	httpAddr, echo := benchServer(b, 1)
	proxy := benchProxy(b, echo, httpAddr)
	one := func(b *testing.B, c net.Conn) {
		buf := []byte{1}
		if _, err := c.Write(buf); err != nil {
			b.Fatal(err)
		}
		if _, err := io.ReadFull(c, buf); err != nil {
			b.Fatal(err)
		}
		c.Close()
	}
	b.Run("tcp-direct", func(b *testing.B) {
		for b.Loop() {
			c, err := net.Dial("tcp", echo)
			if err != nil {
				b.Fatal(err)
			}
			one(b, c)
		}
	})
	b.Run("tcp-proxy-connect", func(b *testing.B) {
		for b.Loop() {
			c, err := net.Dial("tcp", proxy)
			if err != nil {
				b.Fatal(err)
			}
			connect(b, c, echo)
			one(b, c)
		}
	})
	small := func(b *testing.B, addr, req string) {
		for b.Loop() {
			c, err := net.Dial("tcp", addr)
			if err != nil {
				b.Fatal(err)
			}
			io.WriteString(c, req)
			res, err := http.ReadResponse(bufio.NewReader(c), nil)
			if err != nil {
				b.Fatal(err)
			}
			io.Copy(io.Discard, res.Body)
			c.Close()
		}
	}
	b.Run("http-direct", func(b *testing.B) {
		small(b, httpAddr, "GET /small HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
	})
	b.Run("http-proxy", func(b *testing.B) {
		small(b, proxy, "GET http://"+httpAddr+"/small HTTP/1.1\r\nHost: "+httpAddr+"\r\n\r\n")
	})
}
