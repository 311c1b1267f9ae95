package redact

import (
	"encoding/json"
	"strings"
	"testing"
)

func TestJSON(t *testing.T) {
	tests := []struct {
		name, in, want string
	}{
		{"sensitive string", `{"password": "hunter2", "user": "bob"}`, `{"password":"[REDACTED]","user":"bob"}`},
		{"sensitive values of any type", `{"token": {"a": [1, 2]}, "secret": [1], "api_key": 42, "auth": null, "cookie": true}`,
			`{"token":"[REDACTED]","secret":"[REDACTED]","api_key":"[REDACTED]","auth":"[REDACTED]","cookie":"[REDACTED]"}`},
		{"nested", `{"a": {"b": [{"client_secret": "x"}, {"ok": "y"}]}}`, `{"a":{"b":[{"client_secret":"[REDACTED]"},{"ok":"y"}]}}`},
		{"header map", `{"headers": {"Authorization": "Bearer abc", "X-Api-Key": "k", "Accept": "*/*"}}`,
			`{"headers":{"Authorization":"[REDACTED]","X-Api-Key":"[REDACTED]","Accept":"*/*"}}`},
		{"strings are redacted", `{"cmd": "curl -u admin:hunter2 https://x", "list": ["password=abc", "ok"]}`,
			`{"cmd":"curl -u admin:[REDACTED] https://x","list":["password=[REDACTED]","ok"]}`},
		{"keys are redacted", `{"` + ghp + `": 1}`, `{"[REDACTED]":1}`},
		{"usage counts are kept", `{"usage": {"prompt_tokens": 10, "completion_tokens": 2, "total_tokens": 12}, "max_tokens": 256, "token_type": "bearer"}`,
			`{"usage":{"prompt_tokens":10,"completion_tokens":2,"total_tokens":12},"max_tokens":256,"token_type":"bearer"}`},
		{"order and duplicates kept", `{"z": 1, "a": 2, "z": 3}`, `{"z":1,"a":2,"z":3}`},
		{"numbers kept exactly", `[1.5e3, -0, 12345678901234567890123, 0.1]`, `[1.5e3,-0,12345678901234567890123,0.1]`},
		{"scalars", `"password=abc"`, `"password=[REDACTED]"`},
		{"null", `null`, `null`},
		{"empty containers", `{"a": {}, "b": [], "password": {}}`, `{"a":{},"b":[],"password":"[REDACTED]"}`},
		{"escapes", `{"s": "a\"b\\c\n\t\u0001<&>\u2028é"}`, `{"s":"a\"b\\c\n\t\u0001<&>\u2028é"}`},
		{"whitespace dropped", " {\n \"a\" : [ 1 , 2 ] \n} \n", `{"a":[1,2]}`},
		{"already redacted", `{"password":"[REDACTED]"}`, `{"password":"[REDACTED]"}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := JSON([]byte(tt.in))
			if err != nil {
				t.Fatalf("JSON(%s): %v", tt.in, err)
			}
			if string(got) != tt.want {
				t.Errorf("JSON(%s)\n got %s\nwant %s", tt.in, got, tt.want)
			}
			if !json.Valid(got) {
				t.Errorf("output %s is not valid JSON", got)
			}
			again, err := JSON(got)
			if err != nil || string(again) != string(got) {
				t.Errorf("not idempotent: %s → %s (%v)", got, again, err)
			}
		})
	}
}

func TestJSONLiterals(t *testing.T) {
	r := New("hunter2hunter2", "31415926535")
	got, err := r.JSON([]byte(`{"note": "pw is hunter2hunter2", "pin": 31415926535, "hunter2hunter2": "key", "n": 7}`))
	if err != nil {
		t.Fatal(err)
	}
	want := `{"note":"pw is [REDACTED]","pin":"[REDACTED]","[REDACTED]":"key","n":7}`
	if string(got) != want {
		t.Errorf("got  %s\nwant %s", got, want)
	}
}

func TestJSONInvalid(t *testing.T) {
	tests := []struct{ name, in string }{
		{"empty", ""},
		{"blank", "  \n"},
		{"unclosed object", "{"},
		{"unclosed array", `[1, 2`},
		{"unclosed after sensitive key", `{"password": {"a": 1}`},
		{"trailing comma", `[1,]`},
		{"trailing data", `{"a": 1} x`},
		{"two values", `1 2`},
		{"single quotes", `{'a': 1}`},
		{"bare word", `hello`},
		{"missing colon", `{"a" 1}`},
		{"non-string key", `{1: 2}`},
		{"too deep", strings.Repeat("[", maxDepth+1) + strings.Repeat("]", maxDepth+1)},
		{"too deep under a sensitive key", `{"token":` + strings.Repeat("[", maxDepth+1) + strings.Repeat("]", maxDepth+1) + `}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got, err := JSON([]byte(tt.in)); err == nil {
				t.Errorf("JSON(%.40q) = %.60s, want an error", tt.in, got)
			}
		})
	}
	deep := strings.Repeat("[", maxDepth) + strings.Repeat("]", maxDepth)
	if _, err := JSON([]byte(deep)); err != nil {
		t.Errorf("JSON refused nesting of exactly %d: %v", maxDepth, err)
	}
}

func TestSensitiveKey(t *testing.T) {
	tests := []struct {
		key  string
		want bool
	}{
		{"password", true}, {"Password", true}, {"db_password", true}, {"DB_PASSWORD", true},
		{"passwordHash", true}, {"user.passwd", true}, {"passphrase", true},
		{"token", true}, {"access_token", true}, {"refreshToken", true}, {"csrftoken", true}, {"id_token", true},
		{"secret", true}, {"client_secret", true}, {"clientSecret", true}, {"secrets", true},
		{"api_key", true}, {"apiKey", true}, {"apikey", true}, {"X-Api-Key", true}, {"xAPIKey", true},
		{"private_key", true}, {"privateKey", true}, {"secret_key", true}, {"secret_key_base", true}, {"secretKeyBase", true}, {"aws_secret_access_key", true},
		{"access_key", true}, {"Authorization", true}, {"Proxy-Authorization", true},
		{"cookie", true}, {"Set-Cookie", true}, {"cookies", true},
		{"credentials", true}, {"credential", true}, {"auth", true},
		{"session", true}, {"session_id", true}, {"sessionId", true}, {"PHPSESSID", true},
		{"max_tokens", false}, {"prompt_tokens", false}, {"total_tokens", false}, {"token_type", false},
		{"tokenizer", false}, {"token_count", false}, {"secretName", false}, {"key", false},
		{"public_key", false}, {"aws_access_key_id", false}, {"primary_key", false}, {"author", false},
		{"authorization_url", false}, {"session_count", false}, {"", false}, {"-_-", false},
	}
	for _, tt := range tests {
		if got := sensitiveKey(tt.key); got != tt.want {
			t.Errorf("sensitiveKey(%q) = %v, want %v (words %q)", tt.key, got, tt.want, keyWords(tt.key))
		}
	}
}
