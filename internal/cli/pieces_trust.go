package cli

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/spf13/cobra"

	"github.com/maestro-run/maestro/internal/config"
	"github.com/maestro-run/maestro/internal/host"
	"github.com/maestro-run/maestro/internal/piece"
)

// newPiecesTrustCmd is `maestro pieces trust`: the user's consent to the
// project pieces that grant more than the workspace sandbox. ws is the
// parent command's --workspace.
func newPiecesTrustCmd(io *IOStreams, ws *string) *cobra.Command {
	return &cobra.Command{
		Use:   "trust [NAME...]",
		Short: "Trust the project's pieces that grant more than the workspace sandbox",
		Long: `A piece in a project's .maestro/pieces/ comes with the repository (or was
written there by an agent). One that grants more than the workspace sandbox
— an agent: movement (an agent CLI that runs commands as you), an Ssh* tool
(your ssh_connections), an mcp__ tool or required_mcp (your MCP servers and
their tokens), CreatePiece or UpdatePiece (writes to your own piece
directory) — is ignored until you trust that exact file content: 'maestro
pieces list' marks it UNTRUSTED, and a run (with --piece NAME or without)
says so and runs the definition it would replace, or, when there is none,
refuses --piece NAME.

This command prints what each such piece grants and records it as trusted:
running it is the consent, there is no prompt, so read the pieces (maestro
pieces show NAME, or the file) first. With no NAME, every such piece of the
project is trusted. The record is <maestro home>/trusted-pieces.json (file
real path, links resolved, and SHA-256 of its content): a file changed
afterwards, by you, a pull or an agent, is untrusted again until you run
this again. The same workspace reached by another path (a link to it) is
the same file; a trusted file replaced by a link to another file is not
trusted. Pieces that grant nothing beyond the sandbox, and those of
~/.maestro/pieces/, need no trust.`,
		Example: `  maestro pieces list --workspace ~/src/app      # UNTRUSTED rows, with the command to run
  maestro pieces show deploy --workspace ~/src/app # read it first
  maestro pieces trust --workspace ~/src/app deploy`,
		RunE: func(cmd *cobra.Command, args []string) error {
			home, err := config.Home(io.Getenv)
			if err != nil {
				return failErr(err)
			}
			wsDir, err := host.WorkspaceDir(*ws)
			if err != nil {
				return usageErr("%v", err)
			}
			dirs := pieceDirs(home, wsDir)
			if len(dirs) < 2 {
				fmt.Fprintf(io.Out, "%s is your own piece directory: its pieces need no trust\n", dirs[0])
				return nil
			}
			dir := dirs[1]
			files, err := projectPieceFiles(dir, args)
			if err != nil {
				return usageErr("%v", err)
			}
			trust, err := piece.LoadTrust(filepath.Join(home, piece.TrustFile))
			if err != nil {
				return failErr(err)
			}
			bad, added := 0, 0
			for _, file := range files {
				data, key, err := piece.ReadPieceFile(file)
				if err != nil {
					fmt.Fprintf(io.ErrOut, "maestro: %v\n", err)
					bad++
					continue
				}
				p, err := piece.Parse(file, data)
				if err == nil {
					err = piece.CheckFile(file, p)
				}
				if err != nil {
					fmt.Fprintf(io.ErrOut, "maestro: not trusted, the file is not a valid piece:\n%v\n", err)
					bad++
					continue
				}
				grants := p.Grants()
				if len(grants) == 0 {
					if len(args) > 0 {
						fmt.Fprintf(io.Out, "%s: piece %s grants nothing beyond the workspace sandbox; it needs no trust\n", file, p.Name)
					}
					continue
				}
				trust.Add(key, data)
				added++
				shown := file
				if abs, _ := filepath.Abs(file); abs != key {
					shown += " (the file at " + key + ")"
				}
				fmt.Fprintf(io.Out, "trusted %s (piece %s, sha256 %s), which grants:\n  %s\n", shown, p.Name, piece.Sum(data)[:12], strings.Join(grants, "\n  "))
			}
			if added > 0 {
				if err := trust.Save(); err != nil {
					return failErr(err)
				}
			} else if len(args) == 0 && bad == 0 {
				fmt.Fprintf(io.Out, "no piece in %s grants more than the workspace sandbox: nothing to trust\n", dir)
			}
			if bad > 0 {
				return failErr(fmt.Errorf("%d piece file(s) not trusted", bad))
			}
			return nil
		},
	}
}

// projectPieceFiles are the piece files of the project directory dir the
// catalog reads (NAME.yaml, NAME.yml, not hidden), or, when names are
// given, those of these pieces, each of which must exist.
func projectPieceFiles(dir string, names []string) ([]string, error) {
	entries, err := os.ReadDir(dir)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, err
	}
	byStem := map[string][]string{}
	var all []string
	for _, e := range entries {
		name := e.Name()
		ext := filepath.Ext(name)
		if e.IsDir() || strings.HasPrefix(name, ".") || ext != ".yaml" && ext != ".yml" {
			continue
		}
		file := filepath.Join(dir, name)
		stem := strings.TrimSuffix(name, ext)
		byStem[stem] = append(byStem[stem], file)
		all = append(all, file)
	}
	if len(names) == 0 {
		return all, nil
	}
	var out []string
	for _, n := range names {
		files, ok := byStem[n]
		if !ok {
			var have []string
			for stem := range byStem {
				have = append(have, stem)
			}
			slices.Sort(have)
			if len(have) == 0 {
				return nil, fmt.Errorf("no project piece %q: %s has no piece files", n, dir)
			}
			return nil, fmt.Errorf("no project piece %q in %s; its pieces: %s", n, dir, strings.Join(have, ", "))
		}
		out = append(out, files...)
	}
	return out, nil
}
