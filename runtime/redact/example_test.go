package redact_test

import (
	"fmt"

	"github.com/wardenrt/warden/runtime/redact"
)

func ExampleString() {
	fmt.Println(redact.String("DATABASE_URL=postgres://app:s3cr3t@db.internal/prod"))
	fmt.Println(redact.String("Authorization: Bearer 0a1b2c3d4e5f6a7b8c9d"))
	fmt.Println(redact.String("export GITHUB_TOKEN=ghp_1a2B3c4D5e6F7g8H9i0J1k2L3m4N5o6P7q8R"))
	fmt.Println(redact.String("max_tokens: 256, commit 3f786850e387550fdab836ed7e6dc881de23001b"))
	// Output:
	// DATABASE_URL=postgres://app:[REDACTED]@db.internal/prod
	// Authorization: Bearer [REDACTED]
	// export GITHUB_TOKEN=[REDACTED]
	// max_tokens: 256, commit 3f786850e387550fdab836ed7e6dc881de23001b
}

func ExampleJSON() {
	out, err := redact.JSON([]byte(`{"url": "https://api.example.com/?access_token=abc123", "headers": {"Authorization": "Bearer x", "Accept": "*/*"}, "password": {"old": 1, "new": 2}, "max_tokens": 256}`))
	if err != nil {
		panic(err)
	}
	fmt.Println(string(out))
	// Output:
	// {"url":"https://api.example.com/?access_token=[REDACTED]","headers":{"Authorization":"[REDACTED]","Accept":"*/*"},"password":"[REDACTED]","max_tokens":256}
}

func ExampleNew() {
	// The values of secret environment variables, for example.
	r := redact.New("c0rrect-h0rse-battery", "short")
	fmt.Println(r.String("login with c0rrect-h0rse-battery (not short)"))
	// Output:
	// login with [REDACTED] (not short)
}

func ExampleContains() {
	fmt.Println(redact.Contains("aws_access_key_id = AKIAIOSFODNN7EXAMPLE"))
	fmt.Println(redact.Contains("the task-force met about risk-management"))
	// Output:
	// true
	// false
}

func ExampleRedactor_Replace() {
	r := redact.New()
	text := "DEBUG=false\nGITHUB_TOKEN=ghp_1a2B3c4D5e6F7g8H9i0J1k2L3m4N5o6P7q8R\nfor _, cookie := range jar.Cookies(u) {\n"
	ids := 0
	out, secrets := r.Replace(text, func(kind, original string, at int) string {
		ids++
		return redact.FormatMask(kind, fmt.Sprintf("%04x", ids))
	})
	fmt.Print(out)
	for _, s := range secrets {
		fmt.Printf("line %d: %s\n", s.Line, s.Kind)
	}
	// Output:
	// DEBUG=false
	// GITHUB_TOKEN=[REDACTED:github-token:0001]
	// for _, cookie := range jar.Cookies(u) {
	// line 2: github-token
}
