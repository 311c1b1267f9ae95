package env

import (
	"os"

	"github.com/wardenrt/warden/runtime/agent"
	"github.com/wardenrt/warden/runtime/tool"
)

// openAIDefaultBase and openAIDefaultModel apply when only OPENAI_API_KEY
// is set.
const (
	openAIDefaultBase  = "https://api.openai.com/v1"
	OpenAIDefaultModel = "gpt-4o-mini"
)

// ModelConfig reads the model endpoint from the environment: OPENAI_API_KEY
// and OPENAI_BASE_URL, the model from --model / WARDEN_MODEL.
func (e *Env) ModelConfig() (agent.OpenAIConfig, error) {
	base, key := os.Getenv("OPENAI_BASE_URL"), os.Getenv("OPENAI_API_KEY")
	if base == "" && key == "" {
		return agent.OpenAIConfig{}, Fail(tool.CodeLLMError, ExitUsage,
			"set OPENAI_API_KEY for OpenAI, or OPENAI_BASE_URL for an OpenAI-compatible server (Ollama: http://127.0.0.1:11434/v1)",
			"no model is configured")
	}
	if base == "" {
		base = openAIDefaultBase
	}
	model := e.c.String("model")
	if model == "" {
		model = os.Getenv("WARDEN_MODEL") // commands without a --model flag (workflow run)
	}
	if model == "" {
		if base != openAIDefaultBase {
			return agent.OpenAIConfig{}, UsageErr("name it with --model or WARDEN_MODEL", "which model of %s? none is named", base)
		}
		model = OpenAIDefaultModel
	}
	return agent.OpenAIConfig{BaseURL: base, APIKey: key, Model: model}, nil
}
