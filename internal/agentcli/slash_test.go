package agentcli

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestSlashCommandsFromInitEvent: the slash commands Claude Code publishes
// in its init event are kept by the executor and read back; a definition
// without the slash_commands capability keeps and reads none.
func TestSlashCommandsFromInitEvent(t *testing.T) {
	t.Parallel()
	for _, on := range []bool{true, false} {
		def := withCapability(t, "claude-code", "slash_commands", on)
		dir := t.TempDir()
		bin, _ := filepath.Abs(filepath.Join("testdata", "generic", "cat-fixture"))
		fixture, _ := filepath.Abs(filepath.Join("testdata", "claude-code-2.1.330", "plain-turn.jsonl"))
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		x := &Executor{Def: def, Path: bin, MaxAttempts: 1, SlashCommandsDir: dir, Env: []string{"PATH=/usr/bin:/bin", "FIXTURE=" + fixture}}
		_, err := x.Run(ctx, Request{Invocation: Invocation{Prompt: "hi", Dir: t.TempDir()}}, func(Event) {})
		cancel()
		if err != nil {
			t.Fatal(err)
		}
		sc, err := ReadSlashCommands(context.Background(), def, bin, dir, nil)
		if on && (err != nil || !slices.Contains(sc.Commands, "compact") || sc.Updated.IsZero()) {
			t.Errorf("on: %+v, %v", sc, err)
		}
		if !on && (err == nil || !strings.Contains(err.Error(), "slash_commands is false")) {
			t.Errorf("off: %+v, %v", sc, err)
		}
	}
	// Before any run: says how to get them.
	if _, err := ReadSlashCommands(context.Background(), mustDef(t, "claude-code"), "", t.TempDir(), nil); err == nil || !strings.Contains(err.Error(), "none seen yet") {
		t.Errorf("no run yet: %v", err)
	}
}

// TestSlashCommandsProbe: OpenCode's commands are the keys of "command" in
// the configuration `opencode debug config` prints.
func TestSlashCommandsProbe(t *testing.T) {
	t.Parallel()
	bin := filepath.Join(t.TempDir(), "opencode")
	script := "#!/bin/sh\n[ \"$1 $2\" = \"debug config\" ] || exit 2\n" +
		`echo '{"agent":{},"command":{"review-pr":{"template":"x"},"deploy":{"template":"y"}},"username":"dev"}'` + "\n"
	if err := os.WriteFile(bin, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	sc, err := ReadSlashCommands(context.Background(), mustDef(t, "opencode"), bin, t.TempDir(), []string{"PATH=/usr/bin:/bin"})
	if err != nil || !slices.Equal(sc.Commands, []string{"deploy", "review-pr"}) || sc.Source != "opencode debug config" {
		t.Errorf("probe: %+v, %v", sc, err)
	}
}
