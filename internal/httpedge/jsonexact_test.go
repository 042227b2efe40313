package httpedge_test

import (
	"encoding/json"
	"errors"
	"io"
	"testing"

	"github.com/maestro-run/maestro/internal/httpedge"
)

type exactInner struct {
	Name string `json:"name"`
}

type exactBase struct {
	Owner string `json:"owner"`
}

type exactBody struct {
	exactBase
	Title   string                `json:"title"`
	Plain   int                   // no tag: its Go name
	Skip    string                `json:"-"`
	Inner   *exactInner           `json:"inner,omitempty"`
	Items   []exactInner          `json:"items"`
	ByName  map[string]exactInner `json:"by_name"`
	Payload json.RawMessage       `json:"payload"`
	Any     any                   `json:"any"`
}

// TestDecodeJSONExactNames: DecodeJSON takes a field only by its exact
// name, at any depth (embedded structs, pointers, lists, a map's values);
// a name in another case is an unknown field naming its path and the
// field it looks like; a map's keys and what a json.RawMessage or an
// interface holds are free.
func TestDecodeJSONExactNames(t *testing.T) {
	t.Parallel()
	var ok exactBody
	err := httpedge.DecodeJSON([]byte(`{"owner":"o","title":"t","Plain":1,"inner":{"name":"n"},"items":[{"name":"a"},{"name":"b"}],
		"by_name":{"Key":{"name":"c"}},"payload":{"Title":{"X":[1]}},"any":{"Title":1},"t\u0069tle":"escaped"}`), &ok)
	if err != nil || ok.Owner != "o" || ok.Title != "escaped" || ok.Plain != 1 || ok.Inner.Name != "n" || len(ok.Items) != 2 || ok.ByName["Key"].Name != "c" {
		t.Fatalf("exact names: %v %+v", err, ok)
	}
	for _, c := range []struct{ body, field, known string }{
		{`{"Title":"t"}`, "Title", "title"},
		{`{"OWNER":"o"}`, "OWNER", "owner"},
		{`{"plain":1}`, "plain", "Plain"},
		{`{"inner":{"Name":"n"}}`, "inner.Name", "name"},
		{`{"items":[{"name":"a"},{"NAME":"b"}]}`, "items[1].NAME", "name"},
		{`{"by_name":{"k":{"Name":"c"}}}`, "by_name.k.Name", "name"},
		{`{"Skip":"s"}`, "Skip", ""},
		{`{"colour":"red"}`, "colour", ""},
		// The key is reported, not the type error of its value, which
		// the decoder named by the field it took it for.
		{`{"Title":5}`, "Title", "title"},
		{`{"T\u0069tle":"t"}`, "Title", "title"},
	} {
		err := httpedge.DecodeJSON([]byte(c.body), new(exactBody))
		ue, ok := errors.AsType[*httpedge.UnknownFieldError](err)
		if !ok || ue.Field != c.field || ue.Known != c.known {
			t.Errorf("%s: %v, want the unknown field %q (known %q)", c.body, err, c.field, c.known)
		}
	}
	// What is not about names is the decoder's as before.
	for _, c := range []struct {
		body string
		want func(error) bool
	}{
		{`{"title":5}`, func(err error) bool { f, _, ok := httpedge.JSONTypeError(err); return ok && f == "title" }},
		{`{"title":"t"} {}`, func(err error) bool { return err == httpedge.ErrJSONTrailing }},
		{`{"title":"t"}}`, func(err error) bool { return err == httpedge.ErrJSONTrailing }},
		{" \n", func(err error) bool { return err == io.EOF }},
		{`{"Title":`, func(err error) bool {
			_, ok := errors.AsType[*httpedge.UnknownFieldError](err)
			return err != nil && !ok
		}},
	} {
		if err := httpedge.DecodeJSON([]byte(c.body), new(exactBody)); !c.want(err) {
			t.Errorf("%q: %v", c.body, err)
		}
	}
}

// TestDecodeJSONSyntax: a syntax error says where it is, a body cut short
// says so, and a byte order mark is skipped.
func TestDecodeJSONSyntax(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ body, want string }{
		{`{"title": "x",}`, "invalid character '}' looking for beginning of object key string at line 1, column 15"},
		{"{\n  \"title\": \"é\",\n  \"body\": \"a\n  b\"\n}", `invalid character '\n' in string literal at line 3, column 13`},
		{"  {'title': 1}", `invalid character '\'' looking for beginning of object key string at line 1, column 4`},
		{`{"title": "x"`, "the body ends before its JSON value does (unexpected EOF)"},
	} {
		err := httpedge.DecodeJSON([]byte(c.body), new(exactBody))
		if err == nil || err.Error() != c.want {
			t.Errorf("%q: %v, want %s", c.body, err, c.want)
		}
	}
	var v exactBody
	if err := httpedge.DecodeJSON([]byte("\ufeff{\"title\": \"bom\"}"), &v); err != nil || v.Title != "bom" {
		t.Errorf("after a byte order mark: %v %+v", err, v)
	}
}
