package eventbus_test

import (
	"strings"
	"testing"

	"github.com/maestro-run/maestro/internal/config"
	"github.com/maestro-run/maestro/internal/eventbus"
)

func TestFromEnv(t *testing.T) {
	cfg := config.EventBus{URL: "nats://config:4222", Source: "cfg-source"}
	tests := []struct {
		name   string
		env    map[string]string
		cfg    config.EventBus
		on     bool
		url    string
		source string
		create bool
		user   string
		// ignored: the one line of Settings.Ignored starts with it.
		ignored string
	}{
		{name: "nothing set", on: false},
		{name: "MAESTRO_EVENT_BUS_URL", env: map[string]string{"MAESTRO_EVENT_BUS_URL": "nats://a:1", "EVALOPS_NATS_URL": "nats://b:1"}, on: true, url: "nats://a:1", source: "maestro"},
		{name: "EVALOPS_NATS_URL", env: map[string]string{"EVALOPS_NATS_URL": "nats://b:1"}, on: true, url: "nats://b:1", source: "maestro"},
		{name: "config", cfg: cfg, on: true, url: "nats://config:4222", source: "cfg-source"},
		{name: "environment over config", env: map[string]string{"EVALOPS_NATS_URL": "nats://b:1", "MAESTRO_EVENT_BUS_SOURCE": "env-source"}, cfg: cfg, on: true, url: "nats://b:1", source: "env-source"},
		{name: "MAESTRO_EVENT_BUS=0", env: map[string]string{"MAESTRO_EVENT_BUS_URL": "nats://a:1", "MAESTRO_EVENT_BUS": "0"}, on: false},
		{name: "MAESTRO_EVENT_BUS=false over config", env: map[string]string{"MAESTRO_EVENT_BUS": "false"}, cfg: cfg, on: false},
		{name: "MAESTRO_AUDIT_BUS=false", env: map[string]string{"MAESTRO_EVENT_BUS_URL": "nats://a:1", "MAESTRO_AUDIT_BUS": "FALSE"}, on: false},
		{name: "create stream on", env: map[string]string{"MAESTRO_EVENT_BUS_URL": "nats://a:1", "MAESTRO_EVENT_BUS_CREATE_STREAM": "on"}, on: true, url: "nats://a:1", source: "maestro", create: true},
		{name: "create stream 0 over config", env: map[string]string{"MAESTRO_EVENT_BUS_CREATE_STREAM": "0"}, cfg: config.EventBus{URL: "nats://config:4222", CreateStream: true}, on: true, url: "nats://config:4222", source: "maestro", create: false},
		{name: "create stream from config", cfg: config.EventBus{URL: "nats://config:4222", CreateStream: true}, on: true, url: "nats://config:4222", source: "maestro", create: true},
		// A value neither way is said, not taken silently for the default.
		{name: "create stream y", env: map[string]string{"MAESTRO_EVENT_BUS_URL": "nats://a:1", "MAESTRO_EVENT_BUS_CREATE_STREAM": "y"}, on: true, url: "nats://a:1", source: "maestro",
			ignored: "MAESTRO_EVENT_BUS_CREATE_STREAM=y: not one of 1, true, yes, on or 0, false, no, off (ignored: the stream is expected to exist)"},
		{name: "MAESTRO_EVENT_BUS=disable", env: map[string]string{"MAESTRO_EVENT_BUS_URL": "nats://a:1", "MAESTRO_EVENT_BUS": "disable"}, on: true, url: "nats://a:1", source: "maestro",
			ignored: "MAESTRO_EVENT_BUS=disable: not one of 0, false, off, no"},
		{name: "create stream and auth", env: map[string]string{"MAESTRO_EVENT_BUS_URL": "nats://a:1", "MAESTRO_EVENT_BUS_CREATE_STREAM": "1", "NATS_USER": "u"}, on: true, url: "nats://a:1", source: "maestro", create: true, user: "u"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s, on := eventbus.FromEnv(func(k string) string { return tc.env[k] }, tc.cfg)
			if on != tc.on {
				t.Fatalf("enabled %v, want %v (%+v)", on, tc.on, s)
			}
			if !on {
				return
			}
			if tc.ignored == "" && len(s.Ignored) > 0 || tc.ignored != "" && (len(s.Ignored) != 1 || !strings.HasPrefix(s.Ignored[0], tc.ignored)) {
				t.Errorf("ignored %q, want %q", s.Ignored, tc.ignored)
			}
			if s.URL != tc.url || s.Source != tc.source || s.CreateStream != tc.create || s.User != tc.user {
				t.Errorf("settings %+v, want url %s source %s create %v user %q", s, tc.url, tc.source, tc.create, tc.user)
			}
			// Where the URL came from, for the messages that say it is wrong.
			if want := map[string]string{"nats://a:1": "MAESTRO_EVENT_BUS_URL", "nats://b:1": "EVALOPS_NATS_URL",
				"nats://config:4222": "event_bus.url in config.yaml"}[s.URL]; s.URLFrom != want {
				t.Errorf("URLFrom %q, want %q", s.URLFrom, want)
			}
		})
	}
}

func TestCorrelationFromEnv(t *testing.T) {
	env := map[string]string{"EVALOPS_ORGANIZATION_ID": "org", "MAESTRO_USER_ID": "u", "EVALOPS_WORKSPACE_ID": "ws",
		"MAESTRO_SESSION_ID": "s", "MAESTRO_AGENT_RUN_ID": "r", "MAESTRO_AGENT_RUN_STEP_ID": "st", "MAESTRO_SURFACE": "cli"}
	c := eventbus.CorrelationFromEnv(func(k string) string { return env[k] }, []string{"MAESTRO_EVENT_BUS_ATTR_TEAM=blue", "OTHER=x"})
	want := eventbus.Correlation{OrganizationID: "org", UserID: "u", WorkspaceID: "ws", SessionID: "s", AgentRunID: "r",
		AgentRunStepID: "st", Surface: "cli", Attributes: map[string]string{"team": "blue"}}
	if c.OrganizationID != want.OrganizationID || c.UserID != want.UserID || c.WorkspaceID != want.WorkspaceID ||
		c.SessionID != want.SessionID || c.AgentRunID != want.AgentRunID || c.AgentRunStepID != want.AgentRunStepID ||
		c.Surface != want.Surface || c.Attributes["team"] != "blue" || len(c.Attributes) != 1 {
		t.Errorf("correlation %+v, want %+v", c, want)
	}
}
