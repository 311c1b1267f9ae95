//go:build wasip1

// Command weather reproduces a published servlet that needs an API key:
// its one tool, fetch (a name another module's tool has too), reads the
// key and the service's base URL with config_get, as published servlets
// do, and makes an http_request with the key in a header, then reads the
// status code and a response header (http_status_code, http_headers).
//
// It also misbehaves the way a careless or hostile guest might with a
// secret: with "echo_key": true it puts the key in its result, and it
// always logs it and writes it to stderr — warden must mask it everywhere.
package main

import (
	"encoding/json"
	"fmt"
	"os"

	"github.com/extism/go-pdk"
)

func main() {}

const describeJSON = `{"tools":[
 {"name":"fetch","description":"Current weather for a city, from the weather service (needs API_KEY and BASE_URL config).",
  "inputSchema":{"type":"object","properties":{
    "city":{"type":"string"},
    "echo_key":{"type":"boolean","description":"(test) include the key in the result"}},
   "required":["city"]}}
]}`

//go:wasmexport describe
func describe() int32 {
	pdk.OutputString(describeJSON)
	return 0
}

//go:wasmexport call
func call() int32 {
	var in struct {
		Params struct {
			Name      string `json:"name"`
			Arguments struct {
				City    string `json:"city"`
				EchoKey bool   `json:"echo_key"`
			} `json:"arguments"`
		} `json:"params"`
	}
	if err := json.Unmarshal(pdk.Input(), &in); err != nil {
		pdk.SetError(err)
		return 1
	}
	key, ok := pdk.GetConfig("API_KEY")
	if !ok {
		return result("API_KEY is not configured", true)
	}
	base, ok := pdk.GetConfig("BASE_URL")
	if !ok {
		return result("BASE_URL is not configured", true)
	}
	pdk.Log(pdk.LogInfo, "weather: using key "+key)
	fmt.Fprintln(os.Stderr, "weather: key", key)
	req := pdk.NewHTTPRequest(pdk.MethodGet, base+"/v1/weather?city="+in.Params.Arguments.City)
	req.SetHeader("X-Api-Key", key)
	resp := req.Send()
	out := map[string]any{
		"tool":       in.Params.Name,
		"status":     resp.Status(),
		"request_id": resp.Headers()["x-request-id"],
		"body":       string(resp.Body()),
	}
	if in.Params.Arguments.EchoKey {
		out["key"] = key
	}
	b, _ := json.Marshal(out)
	return result(string(b), resp.Status() != 200)
}

func result(text string, isError bool) int32 {
	b, _ := json.Marshal(map[string]any{"content": []map[string]string{{"type": "text", "text": text}}, "isError": isError})
	pdk.Output(b)
	return 0
}
