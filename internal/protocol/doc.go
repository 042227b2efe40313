// Package protocol defines the wire types of Maestro's headless protocol
// (version 2026-04-02), as specified by the wire contract in
// shared/spec/headless-wire-contract.md.
//
// There is exactly one Go type family for protocol messages: every surface
// (terminal renderer, stdio transport, SSE, job log, web UI, event bus) is a
// projection of these types. Each message type is a struct whose fields are
// the contract's snake_case fields; the "type" discriminator is not a struct
// field but is supplied by MessageType and written by Marshal, so a message
// can never carry the wrong discriminator.
//
// This package imports nothing else of Maestro's.
package protocol

// Version is the protocol version this implementation speaks.
const Version = "2026-04-02"
