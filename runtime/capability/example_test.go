package capability_test

import (
	"fmt"
	"net/netip"
	"os"
	"path/filepath"

	"github.com/wardenrt/warden/runtime/capability"
)

func ExampleParse() {
	g, err := capability.Parse("net:API.GitHub.com.:443")
	if err != nil {
		panic(err)
	}
	fmt.Println(g.Kind(), g.Scope(), g)

	_, err = capability.Parse("fs.raed:**")
	fmt.Println(err)
	// Output:
	// net api.github.com:443 net:api.github.com:443
	// capability "fs.raed:**": unknown kind "fs.raed" (did you mean "fs.read"?) (known: fs.read, fs.write, exec, net, env, memory.read, memory.write, git.read, git.write, system.info, user.ask, llm)
}

func ExampleSet_Allows() {
	s, err := capability.ParseSet("/home/me/proj", []string{"fs.read:**", "fs.write:notes/**", "net:*.github.com:443"})
	if err != nil {
		panic(err)
	}
	for _, n := range []capability.Need{
		{Kind: capability.FSWrite, Resource: "/home/me/proj/notes/todo.md"},
		{Kind: capability.FSWrite, Resource: "/home/me/proj/main.go"},
		{Kind: capability.FSRead, Resource: "/etc/passwd"},
		{Kind: capability.Net, Resource: "api.github.com:443"},
		{Kind: capability.Net, Resource: "github.com:443"},
		{Kind: capability.Net, Resource: "127.0.0.1:443"},
	} {
		fmt.Println(n, s.Allows(n))
	}
	// Output:
	// fs.write:/home/me/proj/notes/todo.md true
	// fs.write:/home/me/proj/main.go false
	// fs.read:/etc/passwd false
	// net:api.github.com:443 true
	// net:github.com:443 false
	// net:127.0.0.1:443 false
}

func ExampleSet_Check() {
	s := capability.NewSet("/home/me/proj", capability.MustParse("fs.read:**"))
	missing := s.Check(
		capability.Need{Kind: capability.FSRead, Resource: "/home/me/proj/a.txt"},
		capability.Need{Kind: capability.FSWrite, Resource: "/home/me/proj/notes/a.txt"},
		capability.Need{Kind: capability.Exec, Resource: "git"},
	)
	for _, n := range missing {
		fmt.Println("needs the grant", n.Hint(s.Workspace()))
	}
	// Output:
	// needs the grant fs.write:notes/a.txt
	// needs the grant exec:git
}

func ExampleSet_Intersect() {
	run := capability.NewSet("/ws", capability.MustParse("fs.read:**"), capability.MustParse("exec:*"))
	tool := capability.NewSet("/ws", capability.MustParse("fs.read:data/**"), capability.MustParse("exec:git"))
	s := run.Intersect(tool)
	fmt.Println(s)
	fmt.Println(s.Grants())
	fmt.Println(s.Allows(capability.Need{Kind: capability.FSRead, Resource: "/ws/data/x.csv"}))
	fmt.Println(s.Allows(capability.Need{Kind: capability.FSRead, Resource: "/ws/secrets.env"}))
	// Output:
	// (fs.read:**, exec:*) ∩ (fs.read:data/**, exec:git)
	// [fs.read:data/** exec:git]
	// true
	// false
}

func ExampleSet_Union() {
	policy := capability.NewSet("/ws", capability.MustParse("fs.read:**"))
	flags := capability.NewSet("/ws", capability.MustParse("fs.write:notes/**"))
	fmt.Println(policy.Union(flags))
	// Output:
	// fs.read:**, fs.write:notes/**
}

func ExampleSet_AllowsAddr() {
	s := capability.NewSet("/ws", capability.MustParse("net:*"), capability.MustParse("net:127.0.0.1:8080"))
	for _, a := range []string{"93.184.216.34", "169.254.169.254", "10.0.0.1", "127.0.0.1"} {
		addr := netip.MustParseAddr(a)
		fmt.Printf("%s %q %v\n", a, capability.SpecialAddr(addr), s.AllowsAddr(addr, 8080))
	}
	// Output:
	// 93.184.216.34 "" true
	// 169.254.169.254 "cloud metadata" false
	// 10.0.0.1 "private (RFC 1918)" false
	// 127.0.0.1 "loopback" true
}

func ExampleGrant_Broad() {
	for _, s := range []string{"exec:git", "exec:python3", "fs.write:**", "net:*"} {
		fmt.Printf("%s: %q\n", s, capability.MustParse(s).Broad())
	}
	// Output:
	// exec:git: ""
	// exec:python3: "exec:python3 runs any code it is given (python3 is an interpreter): within the call's fs and net grants, and starting only programs exec: grants name"
	// fs.write:**: "fs.write:** lets programs change every file it names but .git/, .warden/ and the policy's protect: paths, which are read-only to them at sandbox level full; at lower levels a program can change .git/hooks/pre-commit (git hooks run code; the policy sets the grants). warden's own tools never change them"
	// net:*: "net:* lets the tool reach every host name"
}

func ExampleGrant_Base() {
	fmt.Println(capability.MustParse("fs.read:/etc/nginx/**").Base("/ws"))
	fmt.Println(capability.MustParse("fs.write:notes/*.md").Base("/ws"))
	// Output:
	// /etc/nginx
	// /ws/notes
}

func ExampleNeed_Hint() {
	n := capability.Need{Kind: capability.FSWrite, Resource: "/ws/notes/a.txt"}
	fmt.Println(n)
	fmt.Println(n.Hint("/ws"))
	fmt.Println(capability.Need{Kind: capability.GitWrite}.Hint("/ws"))
	// Output:
	// fs.write:/ws/notes/a.txt
	// fs.write:notes/a.txt
	// git.write
}

func ExampleCanonicalHost() {
	for _, h := range []string{"Example.COM.", "2130706433", "0x7f.1", "[::ffff:10.0.0.1]", "fe80::1%eth0"} {
		c, isIP := capability.CanonicalHost(h)
		fmt.Printf("%s → %q %v\n", h, c, isIP)
	}
	// Output:
	// Example.COM. → "example.com" false
	// 2130706433 → "127.0.0.1" true
	// 0x7f.1 → "127.0.0.1" true
	// [::ffff:10.0.0.1] → "10.0.0.1" true
	// fe80::1%eth0 → "" false
}

func ExampleNetNeed() {
	n, err := capability.NetNeed("::1", 8080)
	if err != nil {
		panic(err)
	}
	fmt.Println(n)
	// Output:
	// net:[::1]:8080
}

func ExampleResolvePath() {
	dir, err := os.MkdirTemp("", "ws")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(dir)
	ws, _ := filepath.EvalSymlinks(dir)
	_ = os.Symlink("/etc", filepath.Join(ws, "etc-link"))

	p, err := capability.ResolvePath(ws, "etc-link/hosts")
	if err != nil {
		panic(err)
	}
	fmt.Println(p)
	s := capability.NewSet(ws, capability.MustParse("fs.read:**"))
	fmt.Println(s.Allows(capability.Need{Kind: capability.FSRead, Resource: p}))
	// Output:
	// /etc/hosts
	// false
}
