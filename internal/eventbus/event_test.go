package eventbus

import (
	"encoding/json"
	"maps"
	"reflect"
	"testing"
	"time"

	cloudevents "github.com/cloudevents/sdk-go/v2/event"
)

// encodeSDK is Encode written with the CloudEvents SDK, the reference
// the hand-written encoding must agree with.
func encodeSDK(t testing.TB, ev Event, source string, corr Correlation) []byte {
	t.Helper()
	e := cloudevents.New(cloudevents.CloudEventsVersionV1)
	e.SetID(ev.ID)
	e.SetType(ev.Type)
	e.SetSource(source)
	e.SetSubject(ev.Type)
	e.SetTime(ev.Time.UTC())
	data := maps.Clone(ev.Data)
	if data == nil {
		data = map[string]any{}
	}
	if msg := schemaMessage(ev.Type); msg != "" {
		e.SetDataSchema("https://buf.build/evalops/proto/maestro.v1." + msg)
		data["@type"] = "type.googleapis.com/maestro.v1." + msg
	}
	corrData := map[string]any{"session_id": "unknown"}
	for _, f := range corr.fields() {
		if f.value != "" {
			e.SetExtension(f.ext, f.value)
			corrData[f.key] = f.value
		}
	}
	if len(corr.Attributes) > 0 {
		corrData["attributes"] = corr.Attributes
	}
	data["correlation"] = corrData
	if err := e.SetData(cloudevents.ApplicationJSON, data); err != nil {
		t.Fatal(err)
	}
	out, err := e.MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// decoded is a CloudEvent as a consumer reads it: its attributes and its
// data decoded.
func decoded(t *testing.T, doc []byte) (cloudevents.Event, any) {
	t.Helper()
	var e cloudevents.Event
	if err := json.Unmarshal(doc, &e); err != nil {
		t.Fatalf("no CloudEvent: %v\n%s", err, doc)
	}
	if err := e.Validate(); err != nil {
		t.Fatalf("invalid CloudEvent: %v\n%s", err, doc)
	}
	var data any
	if err := json.Unmarshal(e.Data(), &data); err != nil {
		t.Fatalf("data: %v\n%s", err, doc)
	}
	e.DataEncoded = nil
	return e, data
}

func TestEncodeMatchesSDK(t *testing.T) {
	at := time.Date(2026, 11, 27, 3, 4, 5, 123456789, time.FixedZone("x", 3600))
	full := Correlation{OrganizationID: "org_1", UserID: "user \"1\"", WorkspaceID: "ws_1", SessionID: "s1",
		AgentRunID: "run_1", AgentRunStepID: "step_1", Surface: "cli", TaskID: "7",
		Attributes: map[string]string{"team": "a", "z\n": "\u2028<&>\xff"}}
	for _, c := range []struct {
		name string
		ev   Event
		corr Correlation
	}{
		{"session started", Event{ID: "s1.1.0", Type: TypeSessionStarted, Time: at,
			Data: map[string]any{"session_id": "s1", "state": "started", "model": "m", "provider": "p", "executor_type": ""}}, full},
		{"tool call, no correlation", Event{ID: "s1.2.0", Type: TypeToolCallAttempted, Time: at,
			Data: map[string]any{"tool_call_id": "c1", "tool_name": "Bash\t\x01", "requires_approval": true}}, Correlation{}},
		{"job, numbers", Event{ID: "j1.3.0", Type: TypeJobSucceeded, Time: at,
			Data: map[string]any{"job_id": int64(12), "state": "succeeded", "attempt": 2, "task_id": int64(-3), "nested": map[string]string{"k": "v"}}},
			Correlation{UserID: "owner", TaskID: "3"}},
		{"no data", Event{ID: "x", Type: TypeSessionClosed, Time: at}, Correlation{SessionID: "s"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, err := Encode(c.ev, "maestro/test", c.corr)
			if err != nil {
				t.Fatal(err)
			}
			if !json.Valid(got) {
				t.Fatalf("not JSON: %s", got)
			}
			gotEv, gotData := decoded(t, got)
			wantEv, wantData := decoded(t, encodeSDK(t, c.ev, "maestro/test", c.corr))
			if !reflect.DeepEqual(gotEv, wantEv) {
				t.Errorf("attributes:\n got %v\nwant %v", gotEv, wantEv)
			}
			if !reflect.DeepEqual(gotData, wantData) {
				t.Errorf("data:\n got %v\nwant %v", gotData, wantData)
			}
		})
	}
	for _, bad := range []struct {
		ev     Event
		source string
	}{{Event{Type: TypeSessionStarted}, "maestro"}, {Event{ID: "x"}, "maestro"}, {Event{ID: "x", Type: TypeSessionStarted}, ""},
		{Event{ID: "x", Type: TypeSessionStarted}, "%zz"}} {
		if _, err := Encode(bad.ev, bad.source, Correlation{}); err == nil {
			t.Errorf("Encode(%+v, %q) did not fail", bad.ev, bad.source)
		}
	}
}

// BenchmarkEncode: one tool_call.completed event, written by Encode and,
// as the baseline in the same run, through the CloudEvents SDK
// (encodeSDK, what Encode did before).
func BenchmarkEncode(b *testing.B) {
	ev := Event{ID: "0193a5b2-session.12.0", Type: TypeToolCallCompleted, Time: time.Now(),
		Data: map[string]any{"tool_call_id": "call_abc", "tool_name": "Read", "status": "MAESTRO_TOOL_CALL_STATUS_SUCCEEDED"}}
	corr := Correlation{OrganizationID: "org_1", UserID: "user_1", WorkspaceID: "ws_1", SessionID: "s1", AgentRunID: "run_1"}
	b.Run("direct", func(b *testing.B) {
		for b.Loop() {
			if _, err := Encode(ev, "maestro", corr); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("sdk", func(b *testing.B) {
		for b.Loop() {
			encodeSDK(b, ev, "maestro", corr)
		}
	})
}
