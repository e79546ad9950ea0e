package cetest

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/cloudevents/sdk-go/v2/binding"
	"github.com/cloudevents/sdk-go/v2/binding/spec"
	cloudevents "github.com/cloudevents/sdk-go/v2/event"
	"github.com/twmb/franz-go/pkg/kgo"
)

// Message reads a franz-go record as a message of the CloudEvents Kafka protocol
// binding, binary content mode, for the SDK (binding.ToEvent). The SDK has Kafka bindings for
// sarama and confluent-kafka-go only; this is what they do with a consumed message: ce_*
// headers are attributes (or extensions), content-type is datacontenttype, the value is data.
type Message struct{ R *kgo.Record }

var (
	ceSpecs                               = spec.WithPrefix("ce_")
	_       binding.Message               = Message{}
	_       binding.MessageMetadataReader = Message{}
)

func (m Message) version() spec.Version {
	for _, h := range m.R.Headers {
		if strings.ToLower(h.Key) == ceSpecs.PrefixedSpecVersionName() {
			return ceSpecs.Version(string(h.Value))
		}
	}
	return nil
}

// ReadEncoding implements binding.Message: binary when the record has a ce_specversion header.
func (m Message) ReadEncoding() binding.Encoding {
	if m.version() != nil {
		return binding.EncodingBinary
	}
	return binding.EncodingUnknown
}

// ReadStructured implements binding.Message: the relay never writes structured mode.
func (m Message) ReadStructured(context.Context, binding.StructuredWriter) error {
	return binding.ErrNotStructured
}

// ReadBinary implements binding.Message from the record's ce_ headers and value.
func (m Message) ReadBinary(_ context.Context, w binding.BinaryWriter) error {
	v := m.version()
	if v == nil {
		return binding.ErrNotBinary
	}
	for _, h := range m.R.Headers {
		k := strings.ToLower(h.Key)
		var err error
		switch {
		case strings.HasPrefix(k, "ce_"):
			if a := v.Attribute(k); a != nil {
				err = w.SetAttribute(a, string(h.Value))
			} else {
				err = w.SetExtension(strings.TrimPrefix(k, "ce_"), string(h.Value))
			}
		case k == "content-type":
			err = w.SetAttribute(v.AttributeFromKind(spec.DataContentType), string(h.Value))
		}
		if err != nil {
			return err
		}
	}
	if m.R.Value != nil {
		return w.SetData(bytes.NewReader(m.R.Value))
	}
	return nil
}

func (m Message) header(name string) (string, bool) {
	for _, h := range m.R.Headers {
		if strings.EqualFold(h.Key, name) {
			return string(h.Value), true
		}
	}
	return "", false
}

// GetAttribute implements binding.MessageMetadataReader from the record's headers.
func (m Message) GetAttribute(k spec.Kind) (spec.Attribute, any) {
	v := m.version()
	if v == nil {
		return nil, nil
	}
	a := v.AttributeFromKind(k)
	if a == nil {
		return nil, nil
	}
	name := a.PrefixedName()
	if k == spec.DataContentType {
		name = "content-type"
	}
	if val, ok := m.header(name); ok {
		return a, val
	}
	return a, nil
}

// GetExtension implements binding.MessageMetadataReader from the record's ce_ headers.
func (m Message) GetExtension(name string) any {
	if val, ok := m.header("ce_" + name); ok {
		return val
	}
	return nil
}

// Finish implements binding.Message; there is nothing to release.
func (m Message) Finish(error) error { return nil }

// Parse parses r with the CloudEvents SDK and validates the event; it fails t if either fails.
func Parse(t testing.TB, r *kgo.Record) *cloudevents.Event {
	t.Helper()
	ev, err := binding.ToEvent(context.Background(), Message{r})
	if err != nil {
		t.Fatalf("the CloudEvents SDK cannot read the record: %v (headers %v)", err, r.Headers)
	}
	if err := ev.Validate(); err != nil {
		t.Fatalf("invalid CloudEvent %s: %v", ev, err)
	}
	return ev
}
