package decoder

import (
	"errors"
	"fmt"

	"github.com/jackc/pglogrepl"
)

var (
	// ErrUnknownRelation means an Insert named a relation id no Relation message announced since
	// the decoder was created or Reset. A *ProtocolError wraps it.
	ErrUnknownRelation = errors.New("unknown relation id")
	// ErrProtocol matches every *ProtocolError: the stream is not the pgoutput v1 the decoder expects.
	ErrProtocol = errors.New("pgoutput protocol error")

	// errTruncated is the ProtocolError reason for a message shorter or longer than its fields.
	errTruncated = errors.New("message truncated or malformed")
)

// ProtocolError reports a message that does not fit the pgoutput v1 protocol or the state of the
// stream. errors.Is(err, ErrProtocol) holds for every ProtocolError.
type ProtocolError struct {
	// LSN is the WALStart of the message.
	LSN pglogrepl.LSN
	// Type is the message's type byte (0 for an empty message).
	Type pglogrepl.MessageType
	// Err says what is wrong; it may wrap ErrUnknownRelation.
	Err error
}

func (e *ProtocolError) Error() string {
	name := e.Type.String()
	if name == "Unknown" {
		name = fmt.Sprintf("message type %q", byte(e.Type))
	} else {
		name += " message"
	}
	return fmt.Sprintf("decoder: protocol error at %s in %s: %v", e.LSN, name, e.Err)
}

func (e *ProtocolError) Unwrap() error { return e.Err }

// Is makes every ProtocolError match ErrProtocol.
func (e *ProtocolError) Is(target error) bool { return target == ErrProtocol }
