package protocol

import (
	"bytes"
	"encoding/json"
	"fmt"
	"path"
	"slices"
	"strconv"
)

// JSON Schemas (draft 2020-12) generated from the same type catalogue as
// the codec, so the schemas, the decoder and the encoder cannot disagree.
// docs/protocol/ holds the generated files (go generate; see doc.go) and
// TestSchemasUpToDate keeps them current.

const draft202012 = "https://json-schema.org/draft/2020-12/schema"

// SchemaFiles returns the JSON Schema files of the protocol, keyed by their
// slash-separated path relative to docs/protocol/:
//
//	client/<type>.schema.json   one per client → server message
//	server/<type>.schema.json   one per server → client message
//	sse/<type>.schema.json      one per SSE envelope
//	snapshot.schema.json        a runtime snapshot (HTTP state endpoints)
//	client.schema.json          any client → server message
//	server.schema.json          any server → client message
//	defs.schema.json            every shared definition
//
// Every file is self-contained: the definitions it uses are in its $defs.
func SchemaFiles() (map[string][]byte, error) {
	c := theCatalogue()
	files := map[string][]byte{}
	all := newSchemaGen()
	add := func(name string, root jsonObj, g *schemaGen) error {
		root = append(jsonObj{{"$schema", draft202012}}, root...)
		if len(g.defs) > 0 {
			root = append(root, kv{"$defs", g.sortedDefs()})
		}
		b, err := renderSchema(root)
		if err != nil {
			return fmt.Errorf("render schema %s: %w", name, err)
		}
		files[name] = b
		maps(all.defs, g.defs)
		maps(all.types, g.types)
		return nil
	}
	for _, fam := range []struct {
		dir string
		f   *family
	}{{"client", c.client}, {"server", c.server}, {"sse", c.envelope}} {
		union := newSchemaGen()
		var refs []any
		for _, typ := range fam.f.order {
			ts := fam.f.byType[typ]
			g := newSchemaGen()
			root := jsonObj{
				{"title", typ},
				{"description", fmt.Sprintf("Maestro headless protocol %s, %s: %q (Go type protocol.%s).", Version, fam.f.direction, typ, ts.name)},
			}
			root = append(root, g.structBody(ts)...)
			if err := add(path.Join(fam.dir, typ+".schema.json"), root, g); err != nil {
				return nil, err
			}
			refs = append(refs, union.ref(ts))
		}
		if fam.dir == "sse" {
			continue
		}
		root := jsonObj{
			{"title", fam.dir + " message"},
			{"description", fmt.Sprintf("Any %s message of the Maestro headless protocol %s.", fam.f.direction, Version)},
			{"oneOf", refs},
		}
		if err := add(fam.dir+".schema.json", root, union); err != nil {
			return nil, err
		}
	}
	g := newSchemaGen()
	root := jsonObj{
		{"title", "snapshot"},
		{"description", fmt.Sprintf("A runtime snapshot (HeadlessRuntimeSnapshot) of the Maestro headless protocol %s (Go type protocol.Snapshot).", Version)},
	}
	root = append(root, g.structBody(c.snapshot)...)
	if err := add("snapshot.schema.json", root, g); err != nil {
		return nil, err
	}
	// The shared definitions: everything that is not a message.
	shared := newSchemaGen()
	for name, def := range all.defs {
		if ts := all.types[name]; ts != nil && ts.msgType == "" {
			shared.defs[name] = def
		}
	}
	defs := jsonObj{
		{"title", "shared definitions"},
		{"description", fmt.Sprintf("The shared sub-objects and enumerations of the Maestro headless protocol %s, referenced by the message schemas.", Version)},
	}
	if err := add("defs.schema.json", defs, shared); err != nil {
		return nil, err
	}
	return files, nil
}

func maps[V any](dst, src map[string]V) {
	for k, v := range src {
		dst[k] = v
	}
}

// schemaGen collects the $defs one schema file needs.
type schemaGen struct {
	defs  map[string]any
	types map[string]*typeSpec
}

func newSchemaGen() *schemaGen {
	return &schemaGen{defs: map[string]any{}, types: map[string]*typeSpec{}}
}

func (g *schemaGen) sortedDefs() jsonObj {
	names := make([]string, 0, len(g.defs))
	for n := range g.defs {
		names = append(names, n)
	}
	slices.Sort(names)
	out := make(jsonObj, 0, len(names))
	for _, n := range names {
		out = append(out, kv{n, g.defs[n]})
	}
	return out
}

// ref returns a reference to the named type ts, defining it on first use.
func (g *schemaGen) ref(ts *typeSpec) jsonObj {
	if _, ok := g.defs[ts.name]; !ok {
		g.defs[ts.name] = nil // placeholder: breaks cycles
		g.types[ts.name] = ts
		g.defs[ts.name] = g.namedSchema(ts)
	}
	return jsonObj{{"$ref", "#/$defs/" + ts.name}}
}

func (g *schemaGen) namedSchema(ts *typeSpec) jsonObj {
	switch ts.kind {
	case kindString:
		return jsonObj{{"type", "string"}, {"enum", ts.enum}}
	case kindUnion:
		var alts []any
		for _, vr := range ts.variants {
			props := jsonObj{{ts.tagField.name, jsonObj{{"type", "string"}, {"const", vr.tag}}}}
			required := []string{ts.tagField.name}
			for _, f := range ts.fields {
				if slices.Contains(vr.fields, f.name) {
					props = append(props, kv{f.name, g.fieldSchema(f)})
					required = append(required, f.name)
				}
			}
			alts = append(alts, jsonObj{
				{"type", "object"},
				{"properties", props},
				{"required", required},
				{"additionalProperties", false},
			})
		}
		return jsonObj{{"oneOf", alts}}
	}
	return g.structBody(ts)
}

// structBody is the schema of a struct (a message, with its type const).
func (g *schemaGen) structBody(ts *typeSpec) jsonObj {
	props := jsonObj{}
	var required []string
	if ts.msgType != "" {
		props = append(props, kv{"type", jsonObj{{"type", "string"}, {"const", ts.msgType}}})
		required = append(required, "type")
	}
	for _, f := range ts.fields {
		props = append(props, kv{f.name, g.fieldSchema(f)})
		if f.required {
			required = append(required, f.name)
		}
	}
	out := jsonObj{{"type", "object"}, {"properties", props}}
	if len(required) > 0 {
		out = append(out, kv{"required", required})
	}
	return append(out, kv{"additionalProperties", false})
}

func (g *schemaGen) fieldSchema(f *fieldSpec) jsonObj {
	ts := f.ts
	if ts.kind == kindPtr || ts.kind == kindNullable {
		ts = ts.elem
	}
	s := g.valueSchema(ts)
	if f.min != nil {
		s = append(s, kv{"minimum", *f.min})
	}
	if f.unique {
		s = append(s, kv{"uniqueItems", true})
	}
	if f.constVal != "" {
		s = append(s, kv{"const", f.constVal})
	}
	if f.nullable {
		if t, ok := s.get("type").(string); ok {
			s = s.set("type", []string{t, "null"})
		} else {
			s = jsonObj{{"anyOf", []any{s, jsonObj{{"type", "null"}}}}}
		}
	}
	return s
}

func (g *schemaGen) valueSchema(ts *typeSpec) jsonObj {
	switch ts.kind {
	case kindString:
		if ts.enum != nil {
			return g.ref(ts)
		}
		return jsonObj{{"type", "string"}}
	case kindBool:
		return jsonObj{{"type", "boolean"}}
	case kindInt:
		return jsonObj{{"type", "integer"}}
	case kindFloat:
		return jsonObj{{"type", "number"}}
	case kindRaw:
		return jsonObj{{"description", "Any JSON value."}}
	case kindStruct, kindUnion:
		return g.ref(ts)
	case kindSlice:
		return jsonObj{{"type", "array"}, {"items", g.valueSchema(ts.elem)}}
	case kindMap:
		return jsonObj{{"type", "object"}, {"additionalProperties", g.valueSchema(ts.elem)}}
	case kindPtr, kindNullable:
		return g.valueSchema(ts.elem)
	case kindMessage:
		const name = "ServerMessage"
		if _, ok := g.defs[name]; !ok {
			g.defs[name] = nil
			var refs []any
			for _, typ := range ts.family.order {
				refs = append(refs, g.ref(ts.family.byType[typ]))
			}
			g.defs[name] = jsonObj{{"description", "Any server → client message."}, {"oneOf", refs}}
		}
		return jsonObj{{"$ref", "#/$defs/" + name}}
	}
	panic(fmt.Sprintf("protocol: no schema for kind %d", ts.kind))
}

// jsonObj is a JSON object that keeps its key order.
type jsonObj []kv

type kv struct {
	k string
	v any
}

func (o jsonObj) get(k string) any {
	for _, e := range o {
		if e.k == k {
			return e.v
		}
	}
	return nil
}

func (o jsonObj) set(k string, v any) jsonObj {
	out := slices.Clone(o)
	for i := range out {
		if out[i].k == k {
			out[i].v = v
			return out
		}
	}
	return append(out, kv{k, v})
}

// MarshalJSON writes the keys in order.
func (o jsonObj) MarshalJSON() ([]byte, error) {
	var b bytes.Buffer
	b.WriteByte('{')
	for i, e := range o {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(strconv.Quote(e.k))
		b.WriteByte(':')
		v, err := json.Marshal(e.v)
		if err != nil {
			return nil, err
		}
		b.Write(v)
	}
	b.WriteByte('}')
	return b.Bytes(), nil
}

func renderSchema(root jsonObj) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(root); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}
