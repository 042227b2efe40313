package protocol

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/google/jsonschema-go/jsonschema"
)

// Validator checks JSON frames against the protocol's JSON Schemas (the
// ones SchemaFiles returns and docs/protocol/ holds), independently of the
// Go decoder. Tests use it on every frame they see; transports may use it
// on outgoing messages. Build one with NewValidator and reuse it: it is
// safe for concurrent use.
type Validator struct {
	client   map[string]*jsonschema.Resolved
	server   map[string]*jsonschema.Resolved
	envelope map[string]*jsonschema.Resolved
	snapshot *jsonschema.Resolved
}

// NewValidator resolves every schema once.
func NewValidator() (*Validator, error) {
	files, err := SchemaFiles()
	if err != nil {
		return nil, fmt.Errorf("generate protocol schemas: %w", err)
	}
	v := &Validator{
		client:   map[string]*jsonschema.Resolved{},
		server:   map[string]*jsonschema.Resolved{},
		envelope: map[string]*jsonschema.Resolved{},
	}
	c := theCatalogue()
	for _, fam := range []struct {
		dir string
		f   *family
		m   map[string]*jsonschema.Resolved
	}{{"client", c.client, v.client}, {"server", c.server, v.server}, {"sse", c.envelope, v.envelope}} {
		for _, typ := range fam.f.order {
			r, err := resolveSchema(files, fam.dir+"/"+typ+".schema.json")
			if err != nil {
				return nil, err
			}
			fam.m[typ] = r
		}
	}
	if v.snapshot, err = resolveSchema(files, "snapshot.schema.json"); err != nil {
		return nil, err
	}
	return v, nil
}

func resolveSchema(files map[string][]byte, name string) (*jsonschema.Resolved, error) {
	var s jsonschema.Schema
	if err := json.Unmarshal(files[name], &s); err != nil {
		return nil, fmt.Errorf("load schema %s: %w", name, err)
	}
	r, err := s.Resolve(nil)
	if err != nil {
		return nil, fmt.Errorf("resolve schema %s: %w", name, err)
	}
	return r, nil
}

// ValidateClientFrame checks one client → server line.
func (v *Validator) ValidateClientFrame(line []byte) error {
	return validateTyped(v.client, "client", line)
}

// ValidateServerFrame checks one server → client line.
func (v *Validator) ValidateServerFrame(line []byte) error {
	return validateTyped(v.server, "server", line)
}

// ValidateEnvelope checks the JSON of one SSE data line, including the
// message an envelope carries.
func (v *Validator) ValidateEnvelope(line []byte) error {
	return validateTyped(v.envelope, "SSE envelope", line)
}

// ValidateSnapshot checks a runtime snapshot.
func (v *Validator) ValidateSnapshot(data []byte) error {
	var inst any
	if err := json.Unmarshal(data, &inst); err != nil {
		return fmt.Errorf("validate snapshot: %w", err)
	}
	if err := v.snapshot.Validate(inst); err != nil {
		return fmt.Errorf("validate snapshot: %w", err)
	}
	return nil
}

func validateTyped(schemas map[string]*jsonschema.Resolved, what string, line []byte) error {
	if strings.ContainsRune(strings.TrimRight(string(line), "\r\n"), '\n') {
		return fmt.Errorf("validate %s frame: frame spans more than one line", what)
	}
	var inst any
	if err := json.Unmarshal(line, &inst); err != nil {
		return fmt.Errorf("validate %s frame: %w", what, err)
	}
	obj, ok := inst.(map[string]any)
	if !ok {
		return fmt.Errorf("validate %s frame: not a JSON object", what)
	}
	typ, ok := obj["type"].(string)
	if !ok {
		return fmt.Errorf("validate %s frame: missing string \"type\"", what)
	}
	r := schemas[typ]
	if r == nil {
		return fmt.Errorf("validate %s frame: unknown type %q", what, typ)
	}
	if err := r.Validate(inst); err != nil {
		return fmt.Errorf("validate %s frame %q: %w", what, typ, err)
	}
	return nil
}
