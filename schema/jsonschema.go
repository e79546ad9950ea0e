package schema

import (
	"bytes"
	"errors"
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
		var ve *jsonschema.ValidationError
		if errors.As(err, &ve) {
			return nil, errors.New(strings.Join(strings.Fields(ve.Error()), " "))
		}
		return nil, err
	}
	return append(dst, payload...), nil
}
