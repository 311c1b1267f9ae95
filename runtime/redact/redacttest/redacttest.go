// Package redacttest holds the texts the redaction benchmarks read — those
// of runtime/redact's stages and of builtin/fs's BenchmarkFSRead — so both
// measure the same bytes.
package redacttest

// Code is Go source with secret-sounding names and no secret: what a
// coding agent reads most.
const Code = `func (c *Client) login(ctx context.Context, cfg Config) error {
	for _, cookie := range c.jar.Cookies(c.base) {
		c.log.Debug("cookie", "name", cookie.Name)
	}
	token := cfg.Token
	c.auth = &auth{apiKey: cfg.APIKey, token: token, secret: c.secret}
	if token == "" {
		return fmt.Errorf("no token: set %s", envToken)
	}
	req.Header.Set("Authorization", fmt.Sprintf("Bearer %s", token))
	return nil
}

`

// Env is configuration with a secret every few lines.
const Env = `APP_NAME=warden-bench
DEBUG=false
DB_HOST=db.internal
DB_PASSWORD=s3cr3t-Pa55w0rd-x1
AWS_ACCESS_KEY_ID=AKIAIOSFODNN7EXAMPLE
GITHUB_TOKEN=ghp_1a2B3c4D5e6F7g8H9i0J1k2L3m4N5o6P7q8R
LOG_LEVEL=info
`
