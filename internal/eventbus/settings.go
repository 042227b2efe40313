// Package eventbus publishes Maestro's platform events: CloudEvents 1.0
// (structured JSON) on NATS JetStream subjects of the catalogue in
// docs/events.md ("Platform events"), following the session logs and the
// job logs as outboxes. A publisher never blocks the agent: it reads a log
// after it was written, from a cursor persisted beside the log, publishes
// each event with its id as Nats-Msg-Id (JetStream de-duplicates a
// re-sent event) and waits for the acknowledgement, retrying with backoff
// while NATS is down. After a restart of Maestro or of NATS it continues
// from the persisted cursor. Wire contract §16 describes the bus.
package eventbus

import (
	"cmp"
	"fmt"
	"net/url"
	"strings"

	"github.com/maestro-run/maestro/internal/config"
)

// Settings say where and how to publish.
type Settings struct {
	// URL is the NATS server; empty disables the bus. It may carry
	// credentials (user:password@, token@): messages show Redacted.
	URL string
	// URLFrom names where URL came from (an environment variable, or
	// event_bus.url in config.yaml), for the messages that say it is
	// wrong.
	URLFrom string
	// Token, User and Password authenticate to NATS (all optional).
	Token, User, Password string
	// CreateStream creates the stream StreamName on StreamSubjects
	// before publishing when it does not exist (one that exists is used
	// as it is); otherwise the stream is expected to exist (the platform
	// owns it).
	CreateStream bool
	// Source is the CloudEvents source attribute (default "maestro").
	Source string
	// Ignored says, a line each, which variables FromEnv ignored and
	// why (a value it does not know: MAESTRO_EVENT_BUS=disable,
	// MAESTRO_EVENT_BUS_CREATE_STREAM=y), for the process to show.
	Ignored []string
}

// The stream --event-bus-create-stream creates.
const (
	StreamName     = "MAESTRO"
	StreamSubjects = "maestro.>"
)

// FromEnv returns the bus settings from the environment and the
// configuration file: MAESTRO_EVENT_BUS_URL, EVALOPS_NATS_URL or NATS_URL
// (in that order), else event_bus.url; MAESTRO_EVENT_BUS=0|false (alias
// MAESTRO_AUDIT_BUS) disables the bus even when a URL is set. The boolean
// reports whether the bus is enabled.
func FromEnv(getenv func(string) string, cfg config.EventBus) (Settings, bool) {
	var ignored []string
	for _, k := range []string{"MAESTRO_EVENT_BUS", "MAESTRO_AUDIT_BUS"} {
		switch strings.ToLower(strings.TrimSpace(getenv(k))) {
		case "0", "false", "off", "no":
			return Settings{}, false
		case "", "1", "true", "on", "yes":
		default:
			ignored = append(ignored, fmt.Sprintf("%s=%s: not one of 0, false, off, no (the bus off) or 1, true, on, yes (ignored: the bus is on when a URL is set)", k, getenv(k)))
		}
	}
	s := Settings{
		Token:    cmp.Or(getenv("MAESTRO_EVENT_BUS_TOKEN"), getenv("NATS_TOKEN")),
		User:     cmp.Or(getenv("MAESTRO_EVENT_BUS_USER"), getenv("NATS_USER")),
		Password: cmp.Or(getenv("MAESTRO_EVENT_BUS_PASSWORD"), getenv("NATS_PASSWORD")),
		Source:   cmp.Or(getenv("MAESTRO_EVENT_BUS_SOURCE"), cfg.Source, "maestro"),
	}
	for _, k := range []string{"MAESTRO_EVENT_BUS_URL", "EVALOPS_NATS_URL", "NATS_URL"} {
		if v := getenv(k); v != "" {
			s.URL, s.URLFrom = v, k
			break
		}
	}
	if s.URL == "" && cfg.URL != "" {
		s.URL, s.URLFrom = cfg.URL, "event_bus.url in config.yaml"
	}
	// The variable overrides the configuration both ways, and takes the
	// spellings MAESTRO_EVENT_BUS does.
	switch strings.ToLower(strings.TrimSpace(getenv("MAESTRO_EVENT_BUS_CREATE_STREAM"))) {
	case "1", "true", "yes", "on":
		s.CreateStream = true
	case "0", "false", "no", "off":
		s.CreateStream = false
	case "":
		s.CreateStream = cfg.CreateStream
	default:
		s.CreateStream = cfg.CreateStream
		then := "the stream is expected to exist"
		if s.CreateStream {
			then = "event_bus.create_stream in config.yaml creates the stream"
		}
		ignored = append(ignored, fmt.Sprintf("MAESTRO_EVENT_BUS_CREATE_STREAM=%s: not one of 1, true, yes, on or 0, false, no, off (ignored: %s)",
			getenv("MAESTRO_EVENT_BUS_CREATE_STREAM"), then))
	}
	s.Ignored = ignored
	return s, s.URL != ""
}

// Redacted is URL as messages and logs show it: the credentials a
// server's URL may carry (nats://user:password@host, nats://token@host)
// masked, in each URL of a comma-separated list.
func (s Settings) Redacted() string {
	parts := strings.Split(s.URL, ",")
	for i, p := range parts {
		u, err := url.Parse(strings.TrimSpace(p))
		if err != nil || u.User == nil {
			if err != nil && strings.Contains(p, "@") {
				parts[i] = "(a URL with credentials that does not parse)"
			}
			continue
		}
		if _, ok := u.User.Password(); ok {
			u.User = url.UserPassword(u.User.Username(), "xxxxx")
		} else {
			u.User = url.User("xxxxx") // a token
		}
		parts[i] = u.String()
	}
	return strings.Join(parts, ",")
}

// urlName is how messages name the URL: the redacted URL and where it
// came from.
func (s Settings) urlName() string {
	if s.URLFrom == "" {
		return s.Redacted()
	}
	return s.Redacted() + " (" + s.URLFrom + ")"
}

// credentialsHint says which settings gave the credentials the server
// refused, or that none were given.
func (s Settings) credentialsHint() string {
	switch {
	case s.Token != "":
		return "check the token (MAESTRO_EVENT_BUS_TOKEN, else NATS_TOKEN)"
	case s.User != "":
		return "check MAESTRO_EVENT_BUS_USER and MAESTRO_EVENT_BUS_PASSWORD (else NATS_USER, NATS_PASSWORD)"
	case strings.Contains(s.URL, "@"):
		return "check the credentials in " + cmp.Or(s.URLFrom, "the URL")
	}
	return "none were given: set MAESTRO_EVENT_BUS_TOKEN, or MAESTRO_EVENT_BUS_USER and MAESTRO_EVENT_BUS_PASSWORD"
}
