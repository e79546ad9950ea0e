package schema

import (
	"bytes"
	"fmt"
	"strings"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// jsonSchemaCodec validates a JSON payload against the registered JSON Schema and writes it as
// it is. A schema that refers to documents outside itself is not supported.
type jsonSchemaCodec struct{ schema *jsonschema.Schema }

const jsonSchemaURL = "urn:cdc-relay:registered-schema.json"

func newJSONSchemaCodec(text string) (*jsonSchemaCodec, error) {
	doc, err := jsonschema.UnmarshalJSON(strings.NewReader(text))
	if err != nil {
		return nil, fmt.Errorf("the JSON Schema is not JSON: %w", err)
	}
	c := jsonschema.NewCompiler()
	c.UseLoader(noLoader{})
	if err := c.AddResource(jsonSchemaURL, doc); err != nil {
		return nil, fmt.Errorf("the JSON Schema: %w", err)
	}
	s, err := c.Compile(jsonSchemaURL)
	if err != nil {
		return nil, fmt.Errorf("compiling the JSON Schema: %w", err)
	}
	return &jsonSchemaCodec{schema: s}, nil
}

// oneLine is a validation error on one line (the library writes one line a finding), for a
// dead letter's reason.
type oneLine struct{ err error }

func (e oneLine) Error() string { return strings.Join(strings.Fields(e.err.Error()), " ") }
func (e oneLine) Unwrap() error { return e.err }

// noLoader refuses every document outside the registered schema: no file or network reads.
type noLoader struct{}

func (noLoader) Load(url string) (any, error) {
	return nil, fmt.Errorf("the JSON Schema refers to %s, outside itself: not supported", url)
}

func (c *jsonSchemaCodec) encode(dst, payload []byte) ([]byte, error) {
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(payload))
	if err != nil {
		return nil, fmt.Errorf("not JSON: %w", err)
	}
	if err := c.schema.Validate(v); err != nil {
		return nil, oneLine{err}
	}
	return append(dst, payload...), nil
}
