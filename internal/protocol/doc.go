// Package protocol defines the wire types of Maestro's headless protocol
// (version 2026-04-02), as specified by the wire contract in
// docs/spec/headless-wire-contract.md.
//
// There is exactly one Go type family for protocol messages: every surface
// (terminal renderer, stdio transport, SSE, job log, web UI, event bus) is a
// projection of these types. Each message type is a struct whose fields are
// the contract's snake_case fields; the "type" discriminator is not a struct
// field but is supplied by MessageType and written by Marshal, so a message
// can never carry the wrong discriminator.
//
// The package covers:
//
//   - every client → server message (ClientMessages) and server → client
//     message (ServerMessages), their shared sub-objects, the runtime
//     Snapshot and RuntimeState, and the SSE envelopes (Envelopes);
//   - the enumerations as string types with one constant per value;
//   - strict decoding (DecodeClient, DecodeServer, DecodeEnvelope,
//     DecodeSnapshot) that rejects unknown types and properties at any depth
//     with the exact error texts of the reference server (DecodeError,
//     ProtocolError);
//   - encoding (Marshal, AppendMarshal, Encode, and MarshalJSON on every
//     type) with "type" first and one line per message;
//   - JSON Schemas generated from the Go types (SchemaFiles; the files live
//     in docs/protocol/) and a schema Validator independent of the decoder.
//
// Field conventions: a field tagged omitempty/omitzero is optional, any other
// is required. Required nullable fields are pointers (nil encodes null);
// optional nullable fields are Nullable; optional booleans and integers are
// pointers so that an explicit false or 0 survives; any-JSON fields are
// json.RawMessage.
//
// This package imports nothing else of Maestro's.
package protocol

//go:generate go run ./schemagen -dir ../../docs/protocol

// Version is the protocol version this implementation speaks.
const Version = "2026-04-02"
