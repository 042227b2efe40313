package cli

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/maestro-run/maestro/internal/eventbus"
	"github.com/maestro-run/maestro/internal/host"
	"github.com/maestro-run/maestro/internal/telemetry"
)

// eventBusFlag is the flag of the commands that publish platform events.
const eventBusFlag = "event-bus-create-stream"

// addEventBusFlag adds --event-bus-create-stream to the commands that
// publish platform events (run, headless, serve, worker, hosted-runner,
// events smoke): the event
// bus (docs/events.md, "Platform events") then creates its stream
// instead of expecting it, as MAESTRO_EVENT_BUS_CREATE_STREAM=1 does.
func addEventBusFlag(root *cobra.Command, io *IOStreams) {
	usage := "create the JetStream stream " + eventbus.StreamName + " on subjects " + eventbus.StreamSubjects + " for the platform events (else it is expected to exist)"
	for _, path := range [][]string{{"run"}, {"headless"}, {"serve"}, {"worker"}, {"hosted-runner"}, {"events", "smoke"}} {
		if cmd, _, err := root.Find(path); err == nil && cmd != root {
			cmd.Flags().Bool(eventBusFlag, false, usage)
		}
	}
	root.PersistentPreRun = func(cmd *cobra.Command, _ []string) {
		if create, _ := cmd.Flags().GetBool(eventBusFlag); !create {
			return
		}
		getenv := io.Getenv
		io.Getenv = func(k string) string {
			if k == "MAESTRO_EVENT_BUS_CREATE_STREAM" {
				return "1"
			}
			return getenv(k)
		}
	}
}

func newEventsCmd(io *IOStreams) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "events",
		Short: "The platform event bus (CloudEvents on NATS JetStream)",
		Args:  cobra.NoArgs,
	}
	var timeout time.Duration
	smoke := &cobra.Command{
		Use:   "smoke",
		Short: "Publish one maestro.sessions.session.started event to check the bus",
		Long: `Publishes one maestro.sessions.session.started CloudEvent to the NATS server
named by MAESTRO_EVENT_BUS_URL, EVALOPS_NATS_URL, NATS_URL or event_bus.url in
config.yaml, and waits for JetStream's acknowledgement. Exits non-zero when the
server cannot be reached, refuses the credentials, has no JetStream (nats-server
without -js), no stream takes the subject (see --event-bus-create-stream) or
the publish fails.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if timeout <= 0 {
				return usageErr("--timeout must be positive, got %s", timeout)
			}
			h, err := host.New(host.Options{Getenv: io.Getenv})
			if err != nil {
				return &exitError{code: ExitError, err: err}
			}
			s, ok := eventbus.FromEnv(io.Getenv, h.Config().EventBus)
			if !ok {
				if all, _ := eventbus.FromEnv(noBusSwitch(io.Getenv), h.Config().EventBus); all.URL != "" {
					return &exitError{code: ExitError, err: fmt.Errorf("the event bus %s is turned off by MAESTRO_EVENT_BUS (or MAESTRO_AUDIT_BUS) = 0, false, off or no: unset it to publish", all.Redacted())}
				}
				return &exitError{code: ExitError, err: errors.New("no event bus configured: set MAESTRO_EVENT_BUS_URL (or EVALOPS_NATS_URL, NATS_URL, or event_bus.url in config.yaml); MAESTRO_EVENT_BUS=0 or false turns it off")}
			}
			for _, line := range s.Ignored {
				fmt.Fprintf(io.ErrOut, "maestro: warning: %s\n", line)
			}
			id, err := eventbus.Smoke(cmd.Context(), s, eventbus.CorrelationFromEnv(io.Getenv, nil), timeout)
			if err != nil {
				return &exitError{code: ExitError, err: err}
			}
			cmd.Printf("published %s %s to %s\n", eventbus.TypeSessionStarted, id, s.Redacted())
			return nil
		},
	}
	smoke.Flags().DurationVar(&timeout, "timeout", 10*time.Second, "give up after this long")
	cmd.AddCommand(smoke)
	return cmd
}

// noBusSwitch is getenv without the variables that turn the bus off, to
// tell "turned off" from "not configured".
func noBusSwitch(getenv func(string) string) func(string) string {
	return func(k string) string {
		if k == "MAESTRO_EVENT_BUS" || k == "MAESTRO_AUDIT_BUS" {
			return ""
		}
		return getenv(k)
	}
}

// startTracing installs the OpenTelemetry exporter when the OTEL_*
// variables name an endpoint (docs/events.md, "Traces") and returns what
// flushes it at exit (at most 5 s). A bad setting is said and tracing
// stays off.
func startTracing(ctx context.Context, io *IOStreams) func() {
	shutdown, err := telemetry.Setup(ctx, io.Getenv)
	if err != nil {
		fmt.Fprintf(io.ErrOut, "maestro: %v (tracing off)\n", err)
	}
	return func() {
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		if err := shutdown(sctx); err != nil {
			fmt.Fprintf(io.ErrOut, "maestro: tracing: flush the spans: %v\n", err)
		}
	}
}
