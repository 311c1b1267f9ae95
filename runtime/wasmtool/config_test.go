package wasmtool

import (
	"testing"

	"github.com/wardenrt/warden/runtime/capability"
)

func TestConfigServesSidecarAndGrantedEnvOnly(t *testing.T) {
	t.Setenv("WARDEN_TEST_GRANTED", "granted-value")
	t.Setenv("WARDEN_TEST_RUN_LACKS", "run-lacks-it")
	t.Setenv("WARDEN_TEST_NOT_GRANTED", "never")
	tool := &Tool{pin: &Pin{
		Config:  map[string]string{"user_agent": "ua/1"},
		Granted: []string{"env:WARDEN_TEST_GRANTED", "env:WARDEN_TEST_RUN_LACKS", "env:WARDEN_TEST_UNSET"},
	}}
	run := capability.NewSet("/ws", capability.MustParse("env:WARDEN_TEST_GRANTED"), capability.MustParse("env:WARDEN_TEST_NOT_GRANTED"), capability.MustParse("env:WARDEN_TEST_UNSET"))
	granted, err := capability.ParseSet("/ws", tool.pin.Granted)
	if err != nil {
		t.Fatal(err)
	}
	cfg, _, _ := tool.config(nil, run.Intersect(granted))
	want := map[string]string{"user_agent": "ua/1", "env:WARDEN_TEST_GRANTED": "granted-value"}
	if len(cfg) != len(want) {
		t.Fatalf("config %v, want %v", cfg, want)
	}
	for k, v := range want {
		if cfg[k] != v {
			t.Fatalf("config %v, want %v", cfg, want)
		}
	}
}
