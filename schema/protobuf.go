package schema

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/bufbuild/protocompile"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/dynamicpb"
)

// protoCodec writes a JSON payload (protojson: field names as in the .proto or in lowerCamelCase)
// as the binary encoding of one message of the registered .proto file, after Confluent's message
// indexes of that message. An unknown field or a value of the wrong type does not fit.
type protoCodec struct {
	md    protoreflect.MessageDescriptor
	index []byte // the message indexes, encoded as in the wire format
}

const protoFileName = "registered.proto"

// newProtoCodec compiles text and picks the message named want (an error if it is missing),
// else the one named preferred if the file has it, else the file's first message.
func newProtoCodec(text, want, preferred string) (*protoCodec, error) {
	comp := protocompile.Compiler{Resolver: protocompile.WithStandardImports(&protocompile.SourceResolver{
		Accessor: protocompile.SourceAccessorFromMap(map[string]string{protoFileName: text}),
	})}
	files, err := comp.Compile(context.Background(), protoFileName)
	if err != nil {
		return nil, fmt.Errorf("compiling the Protobuf schema: %w", err)
	}
	fd := files.FindFileByPath(protoFileName)
	if fd == nil || fd.Messages().Len() == 0 {
		return nil, errors.New("the Protobuf schema has no message")
	}
	var md protoreflect.MessageDescriptor
	find := func(name string) protoreflect.MessageDescriptor {
		d, _ := files.AsResolver().FindDescriptorByName(protoreflect.FullName(name))
		m, _ := d.(protoreflect.MessageDescriptor)
		if m != nil && m.ParentFile().Path() != protoFileName {
			return nil
		}
		return m
	}
	switch {
	case want != "":
		if md = find(want); md == nil {
			return nil, fmt.Errorf("the Protobuf schema has no message %s", want)
		}
	case preferred != "":
		md = find(preferred)
	}
	if md == nil {
		md = fd.Messages().Get(0)
	}
	return &protoCodec{md: md, index: messageIndex(md)}, nil
}

// messageIndex is the wire format's path to md: the indexes of md and its enclosing messages,
// outermost first, as a count and zig-zag varints (Avro's long encoding, appendAvroLong); the
// path [0] is the single byte 0.
func messageIndex(md protoreflect.MessageDescriptor) []byte {
	var path []int
	for d := protoreflect.Descriptor(md); ; {
		path = append(path, d.Index())
		p, ok := d.Parent().(protoreflect.MessageDescriptor)
		if !ok {
			break
		}
		d = p
	}
	slices.Reverse(path)
	if len(path) == 1 && path[0] == 0 {
		return []byte{0}
	}
	b := appendAvroLong(nil, int64(len(path)))
	for _, i := range path {
		b = appendAvroLong(b, int64(i))
	}
	return b
}

func (c *protoCodec) encode(dst, payload []byte) ([]byte, error) {
	msg := dynamicpb.NewMessage(c.md)
	if err := (protojson.UnmarshalOptions{}).Unmarshal(payload, msg); err != nil {
		return nil, fmt.Errorf("message %s: %w", c.md.FullName(), err)
	}
	dst = append(dst, c.index...)
	return proto.MarshalOptions{Deterministic: true}.MarshalAppend(dst, msg)
}
