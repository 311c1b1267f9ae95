//go:build unix

package builtin

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os/exec"
	"slices"
	"testing"
	"time"

	"github.com/wardenrt/warden/builtin/internal/proc"
	"github.com/wardenrt/warden/builtin/internal/tooltest"
	"github.com/wardenrt/warden/runtime/capability"
	"github.com/wardenrt/warden/runtime/sandbox"
	"github.com/wardenrt/warden/runtime/tool"
)

// BenchmarkSandboxStart: starting /bin/true as the shell starts its
// programs, side by side. Each iteration starts it once each way, in turn,
// so a busy machine weighs on all of them alike; the medians are reported
// as *-ms metrics:
//
//   - exec: exec.Command, no sandbox;
//   - today: the sandbox as it was before namespaces — the launcher, the
//     limits, Landlock (any readable file executable), seccomp;
//   - fallback: the same with execution held per file (the level without
//     namespaces now);
//   - full: with a network and a mount namespace, noexec program
//     directories, .git and .warden read-only (level full);
//   - full-proxy: full, with the call's egress proxy handed its listener
//     and a bridge.
func BenchmarkSandboxStart(b *testing.B) {
	ws := tooltest.WS(b)
	tooltest.GitInit(b, ws)
	call := &tool.Call{Workspace: ws, Grants: capability.NewSet(ws,
		capability.MustParse("fs.read:**"), capability.MustParse("fs.write:**"), capability.MustParse("exec:true"),
		capability.MustParse("exec:git"), capability.MustParse("exec:cat"), capability.MustParse("exec:sh"))}
	dirs := []string{"/usr/local/sbin", "/usr/local/bin", "/usr/sbin", "/usr/bin", "/sbin", "/bin"}
	box, err := proc.BoxFor(call, dirs)
	if err != nil {
		b.Fatal(err)
	}
	today := box
	today.Exec, today.ExecAny, today.Protect = nil, true, nil
	netCall := *call
	netCall.Grants = call.Grants.Union(capability.NewSet(ws, capability.MustParse("net:127.0.0.1:5432")))
	full := sandbox.Detect().Namespaces
	var pn *proc.Net
	if full {
		if pn, err = proc.NewNet(context.Background(), &netCall, nil); err != nil {
			b.Fatal(err)
		}
		defer pn.Close()
	}
	start := func(box sandbox.Spec, n *proc.Net) {
		if code, err := proc.Run(context.Background(), proc.Spec{Path: "/usr/bin/true", Args: []string{"true"}, Dir: ws, Box: box, Net: n}); err != nil || code != 0 {
			b.Fatal(code, err)
		}
	}
	ways := []struct {
		name string
		run  func()
	}{
		{"exec", func() {
			if err := exec.Command("/usr/bin/true").Run(); err != nil {
				b.Fatal(err)
			}
		}},
		{"today", func() { defer sandbox.SimulateNoNamespaces()(); start(today, nil) }},
		{"fallback", func() { defer sandbox.SimulateNoNamespaces()(); start(box, nil) }},
	}
	if full {
		ways = append(ways,
			struct {
				name string
				run  func()
			}{"full", func() { start(box, nil) }},
			struct {
				name string
				run  func()
			}{"full-proxy", func() { start(box, pn) }})
	}
	ds := make([][]time.Duration, len(ways))
	for b.Loop() {
		for i, w := range ways {
			t0 := time.Now()
			w.run()
			ds[i] = append(ds[i], time.Since(t0))
		}
	}
	for i, w := range ways {
		slices.Sort(ds[i])
		b.ReportMetric(float64(ds[i][len(ds[i])/2].Microseconds())/1000, w.name+"-ms")
	}
}

// BenchmarkSandboxCurlDownload: curl fetching 100 MB from a local server,
// side by side (interleaved): directly (exec.Command, no sandbox) and under
// the sandbox of level full through warden's egress proxy (the server
// granted by its IP:port). The times include curl's start.
func BenchmarkSandboxCurlDownload(b *testing.B) {
	if _, err := exec.LookPath("curl"); err != nil {
		b.Skip("curl is not installed")
	}
	if !sandbox.Detect().Namespaces {
		b.Skip(sandbox.Detect().NamespacesWhy)
	}
	const size = 100 << 20
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Length", fmt.Sprint(size))
		io.CopyN(w, zeros{}, size)
	})}
	go srv.Serve(ln)
	defer srv.Close()
	url := "http://" + ln.Addr().String() + "/big"
	ws := tooltest.WS(b)
	call := &tool.Call{Workspace: ws, Grants: capability.NewSet(ws, capability.MustParse("fs.read:**"),
		capability.MustParse("exec:curl"), capability.MustParse("net:"+ln.Addr().String()))}
	box, err := proc.BoxFor(call, []string{"/usr/bin", "/bin"})
	if err != nil {
		b.Fatal(err)
	}
	n, err := proc.NewNet(context.Background(), call, nil)
	if err != nil {
		b.Fatal(err)
	}
	defer n.Close()
	curl, _ := exec.LookPath("curl")
	ways := []func(){
		func() {
			if out, err := exec.Command(curl, "-sS", "-o", "/dev/null", url).CombinedOutput(); err != nil {
				b.Fatal(err, string(out))
			}
		},
		func() {
			stderr := &proc.CappedBuffer{Max: 4096}
			if code, err := proc.Run(context.Background(), proc.Spec{Path: curl, Args: []string{"curl", "-sS", "-o", "/dev/null", url}, Dir: ws, Box: box, Net: n, Stderr: stderr}); err != nil || code != 0 {
				b.Fatal(code, err, stderr.String())
			}
		},
	}
	ds := make([][]time.Duration, len(ways))
	for b.Loop() {
		for i, w := range ways {
			t0 := time.Now()
			w()
			ds[i] = append(ds[i], time.Since(t0))
		}
	}
	mbs := make([]float64, len(ways))
	for i := range ds {
		slices.Sort(ds[i])
		mbs[i] = float64(size) / 1e6 / ds[i][len(ds[i])/2].Seconds()
	}
	b.ReportMetric(mbs[0], "direct-MB/s")
	b.ReportMetric(mbs[1], "sandbox-proxy-MB/s")
	b.ReportMetric(mbs[1]/mbs[0], "proxy/direct")
}

type zeros struct{}

func (zeros) Read(p []byte) (int, error) {
	clear(p)
	return len(p), nil
}
