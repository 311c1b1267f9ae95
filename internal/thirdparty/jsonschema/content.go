package jsonschema

import "github.com/wardenrt/warden/internal/thirdparty/jsonschema/jsonvalue"

// Decoder specifies how to decode specific contentEncoding.
type Decoder = jsonvalue.Decoder

// MediaType specified how to validate bytes against specific contentMediaType.
type MediaType = jsonvalue.MediaType

var decoders, mediaTypes = jsonvalue.Decoders, jsonvalue.MediaTypes
