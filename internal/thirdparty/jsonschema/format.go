package jsonschema

import "github.com/wardenrt/warden/internal/thirdparty/jsonschema/formatcheck"

// Format defined specific format.
type Format struct {
	// Name of format.
	Name string

	// Validate checks if given value is of this format.
	Validate func(v any) error
}

var formats = map[string]*Format{
	"json-pointer":          {"json-pointer", formatcheck.JSONPointer},
	"relative-json-pointer": {"relative-json-pointer", formatcheck.RelativeJSONPointer},
	"uuid":                  {"uuid", formatcheck.UUID},
	"duration":              {"duration", formatcheck.Duration},
	"period":                {"period", formatcheck.Period},
	"ipv4":                  {"ipv4", formatcheck.IPV4},
	"ipv6":                  {"ipv6", formatcheck.IPV6},
	"hostname":              {"hostname", formatcheck.Hostname},
	"email":                 {"email", formatcheck.Email},
	"date":                  {"date", formatcheck.Date},
	"time":                  {"time", formatcheck.Time},
	"date-time":             {"date-time", formatcheck.DateTime},
	"uri":                   {"uri", formatcheck.URI},
	"iri":                   {"iri", formatcheck.URI},
	"uri-reference":         {"uri-reference", formatcheck.URIReference},
	"iri-reference":         {"iri-reference", formatcheck.URIReference},
	"uri-template":          {"uri-template", formatcheck.URITemplate},
	"semver":                {"semver", formatcheck.Semver},
}
