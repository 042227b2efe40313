package agentcli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"time"
)

// Slash commands are read where each CLI publishes them: Claude Code lists
// them in its init event (so Maestro keeps the list the last run published,
// Executor.SlashCommandsDir), OpenCode in its resolved configuration
// (`opencode debug config`, keys of "command": the definition's
// slash_commands probe). Both are gated by capabilities.slash_commands.

// SlashCommandsProbe asks the CLI for its slash commands: run Args, read
// the JSON it prints, and take the keys of the object at Keys (a path).
type SlashCommandsProbe struct {
	Args []string `yaml:"args"`
	Keys string   `yaml:"keys"`
}

// SlashCommands is a list of slash commands and where it comes from.
type SlashCommands struct {
	Commands []string `json:"commands"`
	// Source is "init event of the last run" or the probe command.
	Source string `json:"source"`
	// Updated is when a published list was saved (zero for a probe).
	Updated time.Time `json:"updated,omitzero"`
}

// SlashCommandsDir is where the slash commands runs publish are kept, in
// the directory of the user's agent definitions.
func SlashCommandsDir(agentsDir string) string { return filepath.Join(agentsDir, ".state") }

// slashFile is where the list a run published is kept.
func slashFile(dir, id string) string { return filepath.Join(dir, id+".slash-commands.json") }

// saveSlashCommands keeps the slash commands the run's parser saw, when the
// executor has a SlashCommandsDir (best effort: a failure to write is not
// the run's failure).
func (x *Executor) saveSlashCommands(p *Parser) {
	cmds := p.SlashCommands()
	if x.SlashCommandsDir == "" || len(cmds) == 0 {
		return
	}
	data, err := json.Marshal(SlashCommands{Commands: cmds, Source: "init event of the last run", Updated: time.Now().UTC()})
	if err != nil || os.MkdirAll(x.SlashCommandsDir, 0o755) != nil {
		return
	}
	tmp := slashFile(x.SlashCommandsDir, x.Def.ID) + ".tmp"
	if os.WriteFile(tmp, data, 0o644) == nil {
		_ = os.Rename(tmp, slashFile(x.SlashCommandsDir, x.Def.ID))
	}
}

// ReadSlashCommands returns def's slash commands: from its probe when it
// has one (bin is the resolved binary), else the list the last run saved
// in dir. A definition without the slash_commands capability has none.
func ReadSlashCommands(ctx context.Context, def *Definition, bin, dir string, env []string) (SlashCommands, error) {
	if !def.Capabilities.SlashCommands {
		return SlashCommands{}, fmt.Errorf("%s has no slash commands (capabilities.slash_commands is false)", def.ID)
	}
	if pr := def.SlashCommandsProbe; len(pr.Args) > 0 && bin != "" {
		return probeSlashCommands(ctx, def, bin, env)
	}
	data, err := os.ReadFile(slashFile(dir, def.ID))
	if errors.Is(err, os.ErrNotExist) {
		return SlashCommands{}, fmt.Errorf("%s publishes its slash commands when it runs; none seen yet (run a prompt with maestro run --agent %s)", def.ID, def.ID)
	}
	if err != nil {
		return SlashCommands{}, fmt.Errorf("read %s slash commands: %w", def.ID, err)
	}
	var sc SlashCommands
	if err := json.Unmarshal(data, &sc); err != nil {
		return SlashCommands{}, fmt.Errorf("read %s slash commands %s: %w", def.ID, slashFile(dir, def.ID), err)
	}
	return sc, nil
}

// probeSlashCommands runs def's slash-command probe, bounded by
// ProbeTimeout as the version probe is (OpenCode's answers in about 2 s).
func probeSlashCommands(ctx context.Context, def *Definition, bin string, env []string) (SlashCommands, error) {
	pctx, cancel := context.WithTimeout(ctx, ProbeTimeout)
	defer cancel()
	pr := def.SlashCommandsProbe
	cmd := exec.CommandContext(pctx, bin, pr.Args...)
	cmd.Env = def.Environ(env, Invocation{})
	cmd.WaitDelay = time.Second
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	src := def.Binary
	for _, a := range pr.Args {
		src += " " + a
	}
	if err != nil && ctx.Err() == nil && pctx.Err() != nil {
		return SlashCommands{}, fmt.Errorf("probe %s slash commands: %s did not answer within %s", def.ID, src, ProbeTimeout)
	}
	if err != nil {
		return SlashCommands{}, fmt.Errorf("probe %s slash commands (%s): %w: %s", def.ID, src, err, bytes.TrimSpace(stderr.Bytes()))
	}
	dec := json.NewDecoder(bytes.NewReader(out))
	dec.UseNumber()
	var doc any
	if err := dec.Decode(&doc); err != nil {
		return SlashCommands{}, fmt.Errorf("probe %s slash commands (%s): not JSON: %w", def.ID, src, err)
	}
	sc := SlashCommands{Commands: []string{}, Source: src}
	v, _ := lookup(doc, pr.Keys)
	if obj, ok := v.(map[string]any); ok {
		for k := range obj {
			sc.Commands = append(sc.Commands, k)
		}
	}
	slices.Sort(sc.Commands)
	return sc, nil
}
