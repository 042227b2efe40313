package protocol

import (
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strconv"
	"strings"
	"sync"
)

// Message type names, client → server (wire contract §5).
const (
	TypeHello                   = "hello"
	TypeInit                    = "init"
	TypePrompt                  = "prompt"
	TypeInterrupt               = "interrupt"
	TypeToolResponse            = "tool_response"
	TypeClientToolResult        = "client_tool_result"
	TypeServerRequestResponse   = "server_request_response"
	TypeUtilityCommandStart     = "utility_command_start"
	TypeUtilityCommandTerminate = "utility_command_terminate"
	TypeUtilityCommandStdin     = "utility_command_stdin"
	TypeUtilityCommandResize    = "utility_command_resize"
	TypeUtilityFileSearch       = "utility_file_search"
	TypeUtilityFileRead         = "utility_file_read"
	TypeUtilityFileWatchStart   = "utility_file_watch_start"
	TypeUtilityFileWatchStop    = "utility_file_watch_stop"
	TypeCancel                  = "cancel"
	TypeShutdown                = "shutdown"
)

// Message type names, server → client (wire contract §6).
const (
	TypeHelloOK                  = "hello_ok"
	TypeReady                    = "ready"
	TypeResponseStart            = "response_start"
	TypeResponseChunk            = "response_chunk"
	TypeResponseEnd              = "response_end"
	TypeToolCall                 = "tool_call"
	TypeToolStart                = "tool_start"
	TypeToolOutput               = "tool_output"
	TypeToolEnd                  = "tool_end"
	TypeClientToolRequest        = "client_tool_request"
	TypeServerRequest            = "server_request"
	TypeServerRequestResolved    = "server_request_resolved"
	TypeRawAgentEvent            = "raw_agent_event"
	TypeUtilityCommandStarted    = "utility_command_started"
	TypeUtilityCommandResized    = "utility_command_resized"
	TypeUtilityCommandOutput     = "utility_command_output"
	TypeUtilityCommandExited     = "utility_command_exited"
	TypeUtilityFileSearchResults = "utility_file_search_results"
	TypeUtilityFileReadResult    = "utility_file_read_result"
	TypeUtilityFileWatchStarted  = "utility_file_watch_started"
	TypeUtilityFileWatchEvent    = "utility_file_watch_event"
	TypeUtilityFileWatchStopped  = "utility_file_watch_stopped"
	TypeError                    = "error"
	TypeStatus                   = "status"
	TypeCompaction               = "compaction"
	TypeSessionInfo              = "session_info"
	TypeConnectionInfo           = "connection_info"
)

// SSE envelope type names (wire contract §12).
const (
	TypeSnapshotEnvelope  = "snapshot"
	TypeMessageEnvelope   = "message"
	TypeHeartbeatEnvelope = "heartbeat"
	TypeResetEnvelope     = "reset"
)

// ClientMessages returns the zero value of every client → server message
// type, in the contract's order.
func ClientMessages() []Message {
	return []Message{
		Hello{}, Init{}, Prompt{}, Interrupt{}, ToolResponse{}, ClientToolResult{},
		ServerRequestResponse{}, UtilityCommandStart{}, UtilityCommandTerminate{},
		UtilityCommandStdin{}, UtilityCommandResize{}, UtilityFileSearch{}, UtilityFileRead{},
		UtilityFileWatchStart{}, UtilityFileWatchStop{}, Cancel{}, Shutdown{},
	}
}

// ServerMessages returns the zero value of every server → client message
// type, in the contract's order.
func ServerMessages() []Message {
	return []Message{
		HelloOK{}, Ready{}, ResponseStart{}, ResponseChunk{}, ResponseEnd{}, ToolCall{},
		ToolStart{}, ToolOutput{}, ToolEnd{}, ClientToolRequest{}, ServerRequest{},
		ServerRequestResolved{}, RawAgentEvent{}, UtilityCommandStarted{},
		UtilityCommandResized{}, UtilityCommandOutput{}, UtilityCommandExited{},
		UtilityFileSearchResults{}, UtilityFileReadResult{}, UtilityFileWatchStarted{},
		UtilityFileWatchEvent{}, UtilityFileWatchStopped{}, Error{}, Status{}, Compaction{},
		SessionInfo{}, ConnectionInfo{},
	}
}

// Envelopes returns the zero value of every SSE envelope type.
func Envelopes() []Message {
	return []Message{SnapshotEnvelope{}, MessageEnvelope{}, HeartbeatEnvelope{}, ResetEnvelope{}}
}

// The codec (strict decoder, encoder, schema generator) is driven by one
// description of every wire type, derived once by reflection from the Go
// types: struct tags give names and optionality, the Go types give JSON
// types, enum types list their values (enumValues), unions list their
// variants (variants), and a `proto` tag adds what tags cannot say:
//
//	proto:"unique"       array items must be unique
//	proto:"min=N"        integer minimum
//	proto:"const=V"      string constant (the encoder writes V when empty)
//	proto:"always"       optional list the encoder always writes (nil as [])
//
// Optionality: a field with omitempty or omitzero is optional, any other is
// required. A required pointer is nullable (encoded null when nil); an
// optional pointer is not. Nullable[T] (with omitzero) is optional and
// nullable. json.RawMessage is any JSON value. Nil required slices encode
// as [].

type kind uint8

const (
	kindString kind = iota + 1
	kindBool
	kindInt
	kindFloat
	kindRaw
	kindStruct
	kindUnion
	kindSlice
	kindMap
	kindPtr
	kindNullable
	kindMessage // the Message interface: any server → client message
)

// typeSpec describes how one Go type maps to JSON.
type typeSpec struct {
	kind    kind
	t       reflect.Type
	name    string   // Go name of named structs and enums (schema $defs key)
	msgType string   // message structs: the "type" discriminator
	enum    []string // enum strings: the allowed values
	fields  []*fieldSpec
	byName  map[string]*fieldSpec
	elem    *typeSpec // slice, map, pointer, Nullable
	// union: the discriminator field and the variants.
	tagField *fieldSpec
	variants []variant
	family   *family // kindMessage
}

// fieldSpec describes one struct field.
type fieldSpec struct {
	name     string
	key      string // `"name":`
	index    int
	bit      uint64
	ts       *typeSpec
	required bool
	nullable bool
	unique   bool
	min      *int64
	constVal string
	always   bool // optional, but always encoded
}

// variant is one alternative of a union type.
type variant struct {
	tag    string   // discriminator value
	fields []string // JSON fields the variant requires (and the only others it allows)
}

// variantSet is implemented by union types.
type variantSet interface{ variants() []variant }

// enumType is implemented by enumeration types.
type enumType interface{ enumValues() []string }

// family is one set of messages sharing a "type" namespace, with the
// wording of its decode errors.
type family struct {
	name      string
	order     []string
	byType    map[string]*typeSpec
	parse     string // prefix of every decode error
	invalid   string // prefix of schema errors, before the JSON pointer
	unknown   string // unknown "type"
	noType    string // missing or non-string "type"
	direction string // for schema descriptions
}

// catalogue holds every wire type's description. It is built once and never
// modified afterwards.
type catalogue struct {
	client, server, envelope *family
	snapshot                 *typeSpec
	specs                    map[reflect.Type]*typeSpec
}

// theCatalogue is the immutable, lazily built catalogue. Building cannot
// fail for the types of this package (TestCatalogue checks it), so a
// failure is a programming error and panics.
var theCatalogue = sync.OnceValue(func() *catalogue {
	c, err := buildCatalogue()
	if err != nil {
		panic(fmt.Sprintf("protocol: building the type catalogue: %v", err))
	}
	return c
})

var (
	rawMessageType = reflect.TypeFor[json.RawMessage]()
	messageType    = reflect.TypeFor[Message]()
	nullableIface  = reflect.TypeFor[nullable]()
	enumIface      = reflect.TypeFor[enumType]()
	variantIface   = reflect.TypeFor[variantSet]()
)

func buildCatalogue() (*catalogue, error) {
	c := &catalogue{specs: map[reflect.Type]*typeSpec{}}
	var err error
	c.client, err = c.family("command", "client → server", ClientMessages())
	if err != nil {
		return nil, err
	}
	c.server, err = c.family("message", "server → client", ServerMessages())
	if err != nil {
		return nil, err
	}
	c.envelope, err = c.family("event", "SSE envelope", Envelopes())
	if err != nil {
		return nil, err
	}
	c.snapshot, err = c.spec(reflect.TypeFor[Snapshot]())
	if err != nil {
		return nil, err
	}
	return c, nil
}

func (c *catalogue) family(noun, direction string, msgs []Message) (*family, error) {
	f := &family{
		name:      noun,
		byType:    map[string]*typeSpec{},
		parse:     "Failed to parse " + noun + ": ",
		invalid:   "Invalid headless " + noun + ": ",
		unknown:   "Unknown headless " + noun + " type",
		noType:    "$.type Expected known headless " + noun + " type",
		direction: direction,
	}
	for _, m := range msgs {
		ts, err := c.spec(reflect.TypeOf(m))
		if err != nil {
			return nil, err
		}
		if _, dup := f.byType[ts.msgType]; dup {
			return nil, fmt.Errorf("duplicate message type %q", ts.msgType)
		}
		f.byType[ts.msgType] = ts
		f.order = append(f.order, ts.msgType)
	}
	return f, nil
}

// spec returns the description of t, building it on first use.
func (c *catalogue) spec(t reflect.Type) (*typeSpec, error) {
	if ts, ok := c.specs[t]; ok {
		if ts.kind == 0 {
			return nil, fmt.Errorf("type %v refers to itself", t)
		}
		return ts, nil
	}
	ts := &typeSpec{t: t}
	c.specs[t] = ts
	if err := c.fill(ts); err != nil {
		delete(c.specs, t)
		return nil, err
	}
	return ts, nil
}

func (c *catalogue) fill(ts *typeSpec) error {
	t := ts.t
	switch {
	case t == rawMessageType:
		ts.kind = kindRaw
		return nil
	case t == messageType:
		if c.server == nil {
			return errors.New("Message field outside the server family")
		}
		ts.kind = kindMessage
		ts.family = c.server
		return nil
	case t.Kind() == reflect.Struct && t.Implements(nullableIface):
		elem, err := c.spec(reflect.Zero(t).Interface().(nullable).nullableElem())
		if err != nil {
			return err
		}
		ts.kind, ts.elem = kindNullable, elem
		return nil
	}
	switch t.Kind() {
	case reflect.String:
		ts.kind = kindString
		if t.Implements(enumIface) {
			ts.enum = reflect.Zero(t).Interface().(enumType).enumValues()
			ts.name = t.Name()
		}
	case reflect.Bool:
		ts.kind = kindBool
	case reflect.Int, reflect.Int64:
		ts.kind = kindInt
	case reflect.Float64:
		ts.kind = kindFloat
	case reflect.Pointer, reflect.Slice:
		elem, err := c.spec(t.Elem())
		if err != nil {
			return err
		}
		ts.kind, ts.elem = kindSlice, elem
		if t.Kind() == reflect.Pointer {
			if elem.kind == kindPtr {
				return fmt.Errorf("type %v: pointer to pointer", t)
			}
			ts.kind = kindPtr
		}
	case reflect.Map:
		if t.Key().Kind() != reflect.String {
			return fmt.Errorf("type %v: map keys must be strings", t)
		}
		elem, err := c.spec(t.Elem())
		if err != nil {
			return err
		}
		ts.kind, ts.elem = kindMap, elem
	case reflect.Struct:
		return c.fillStruct(ts)
	default:
		return fmt.Errorf("type %v is not supported on the wire", t)
	}
	return nil
}

func (c *catalogue) fillStruct(ts *typeSpec) error {
	t := ts.t
	ts.kind = kindStruct
	ts.name = t.Name()
	ts.byName = map[string]*fieldSpec{}
	if t.Implements(messageType) {
		ts.msgType = reflect.Zero(t).Interface().(Message).MessageType()
	}
	for i := range t.NumField() {
		sf := t.Field(i)
		if sf.Anonymous {
			return fmt.Errorf("%v.%s: embedded fields are not supported", t, sf.Name)
		}
		if !sf.IsExported() {
			continue
		}
		name, opts, _ := strings.Cut(sf.Tag.Get("json"), ",")
		if name == "-" {
			continue
		}
		if name == "" {
			return fmt.Errorf("%v.%s: missing json name", t, sf.Name)
		}
		if name == "type" && ts.msgType != "" {
			return fmt.Errorf("%v.%s: message types must not have a type field", t, sf.Name)
		}
		fts, err := c.spec(sf.Type)
		if err != nil {
			return fmt.Errorf("%v.%s: %w", t, sf.Name, err)
		}
		f := &fieldSpec{name: name, index: i, ts: fts, key: strconv.Quote(name) + ":"}
		optional := false
		for o := range strings.SplitSeq(opts, ",") {
			if o == "omitempty" || o == "omitzero" {
				optional = true
			}
		}
		f.required = !optional
		switch fts.kind {
		case kindPtr:
			f.nullable = f.required
		case kindNullable:
			if f.required {
				return fmt.Errorf("%v.%s: Nullable fields must be omitzero (use a pointer for required nullable fields)", t, sf.Name)
			}
			f.nullable = true
		}
		if err := f.parseProto(sf.Tag.Get("proto")); err != nil {
			return fmt.Errorf("%v.%s: %w", t, sf.Name, err)
		}
		if _, dup := ts.byName[name]; dup {
			return fmt.Errorf("%v.%s: duplicate json name %q", t, sf.Name, name)
		}
		if len(ts.fields) == 64 {
			return fmt.Errorf("%v: more than 64 fields", t)
		}
		f.bit = 1 << len(ts.fields)
		ts.fields = append(ts.fields, f)
		ts.byName[name] = f
	}
	if t.Implements(variantIface) {
		ts.kind = kindUnion
		ts.variants = reflect.Zero(t).Interface().(variantSet).variants()
		ts.tagField = ts.byName["type"]
		if ts.tagField == nil || ts.tagField.ts.kind != kindString {
			return fmt.Errorf("%v: union without a string type field", t)
		}
		for _, v := range ts.variants {
			for _, n := range v.fields {
				if ts.byName[n] == nil {
					return fmt.Errorf("%v: variant %q names unknown field %q", t, v.tag, n)
				}
			}
		}
	}
	return nil
}

func (f *fieldSpec) parseProto(tag string) error {
	if tag == "" {
		return nil
	}
	for o := range strings.SplitSeq(tag, ",") {
		key, val, _ := strings.Cut(o, "=")
		switch key {
		case "unique":
			if f.ts.kind != kindSlice {
				return errors.New("unique on a non-array")
			}
			f.unique = true
		case "min":
			n, err := strconv.ParseInt(val, 10, 64)
			if err != nil {
				return fmt.Errorf("bad min %q", val)
			}
			ts := f.ts
			if ts.kind == kindPtr {
				ts = ts.elem
			}
			if ts.kind != kindInt {
				return errors.New("min on a non-integer")
			}
			f.min = &n
		case "always":
			if f.required || f.ts.kind != kindSlice {
				return errors.New("always on a field that is not an optional list")
			}
			f.always = true
		case "const":
			if f.ts.kind != kindString || f.ts.enum != nil || !f.required {
				return errors.New("const on a field that is not a required plain string")
			}
			f.constVal = val
		default:
			return fmt.Errorf("unknown proto option %q", key)
		}
	}
	return nil
}

// specOf returns the description of a wire type of this package, or nil.
func (c *catalogue) specOf(t reflect.Type) *typeSpec {
	return c.specs[t]
}
