package protocol

import (
	"bytes"
	"encoding/json"
	"fmt"
)

// Message is any protocol message, in either direction.
type Message interface {
	// MessageType returns the value of the message's "type" field.
	MessageType() string
}

// Marshal encodes m as one JSON object with its "type" field first.
func Marshal(m Message) ([]byte, error) {
	body, err := json.Marshal(m)
	if err != nil {
		return nil, fmt.Errorf("encode %s message: %w", m.MessageType(), err)
	}
	if len(body) < 2 || body[0] != '{' {
		return nil, fmt.Errorf("encode %s message: not a JSON object", m.MessageType())
	}
	var buf bytes.Buffer
	buf.Grow(len(body) + len(m.MessageType()) + 12)
	buf.WriteString(`{"type":`)
	t, _ := json.Marshal(m.MessageType())
	buf.Write(t)
	if len(body) > 2 {
		buf.WriteByte(',')
	}
	buf.Write(body[1:])
	return buf.Bytes(), nil
}

// Error types (the contract's error_type enumeration).
const (
	ErrorTransient = "transient"
	ErrorFatal     = "fatal"
	ErrorTool      = "tool"
	ErrorCancelled = "cancelled"
	ErrorProtocol  = "protocol"
)

// Executor types reported in ready.executor_type.
const (
	ExecutorLive   = "live"
	ExecutorReplay = "replay"
)
