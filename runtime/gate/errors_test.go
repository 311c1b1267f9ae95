package gate

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/wardenrt/warden/runtime/tool"

	"github.com/wardenrt/warden/runtime/redact"
)

// TestRefusalMasksMissingGrants: a secret in a path is masked in the
// missing grants of a refusal as in its message and hint.
func TestRefusalMasksMissingGrants(t *testing.T) {
	const secret = "hunter2hunter2hunter2"
	g, _, _ := newTestGate(t, "version: 1\n", GateOptions{Redactor: redact.New(secret)})
	res := call(t, g, `{"name":"`+secret+`"}`)
	if res.Error == nil || res.Error.Code != tool.CodeCapabilityDenied || len(res.Error.Missing) != 1 {
		t.Fatalf("%+v", res.Error)
	}
	b, _ := json.Marshal(res.Error)
	if strings.Contains(string(b), secret) || !strings.HasPrefix(res.Error.Missing[0], "fs.write:notes/") {
		t.Fatalf("the secret shows: %s", b)
	}
}
