package cli

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/spf13/cobra"
	"golang.org/x/term"

	"github.com/maestro-run/maestro/internal/engine"
	"github.com/maestro-run/maestro/internal/host"
	"github.com/maestro-run/maestro/internal/mcp"
	"github.com/maestro-run/maestro/internal/piece"
)

func newMCPCmd(ios *IOStreams) *cobra.Command {
	return &cobra.Command{
		Use:   "mcp",
		Short: "Serve Maestro as an MCP server on stdin/stdout (for Claude Code, Codex, …)",
		Long: `Serves Maestro over the Model Context Protocol on stdin/stdout, so an MCP
client (Claude Code, Codex, any other) can delegate tasks to Maestro. Tools:

  list_pieces      the pieces a task can run {workspace?}
  run_task         run a task {prompt, piece?, workspace?, wait?}: waits for it
                   (progress as MCP progress notifications) unless wait is false
  task_status      a task's status and latest progress {task_id}
  task_result      a task's result, or its question when it waits {task_id}
  answer_question  answer a task waiting for the user {task_id, answer}

Each task is a 'maestro run' of its own session (see 'maestro sessions list'),
with the model, configuration and sandbox 'maestro run' would use; the
workspace defaults to the directory 'maestro mcp' runs in. A call the client
cancels stops the task it waits for, and tasks still running when the client
disconnects are stopped, as Ctrl-C stops 'maestro run'. Setup: docs/mcp.md.`,
		Example: `  claude mcp add maestro -- maestro mcp
  codex mcp add maestro -- maestro mcp`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			exe, err := os.Executable()
			if err != nil {
				return failErr(fmt.Errorf("find Maestro's executable: %w", err))
			}
			dir, err := host.WorkspaceDir("")
			if err != nil {
				return failErr(err)
			}
			if f, ok := ios.In.(*os.File); ok && term.IsTerminal(int(f.Fd())) {
				// Run by hand, it waited in silence, and took the first
				// key typed for a malformed message.
				fmt.Fprintln(ios.ErrOut, "maestro mcp speaks MCP on stdin/stdout to the MCP client that starts it, e.g. `claude mcp add maestro -- maestro mcp` (docs/mcp.md); Ctrl-C ends it.")
			}
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			log := slog.New(slog.NewTextHandler(ios.ErrOut, &slog.HandlerOptions{Level: slog.LevelWarn}))
			o := mcpServerOptions(ios, exe, log)
			o.Dir = dir
			srv := mcp.NewServer(o)
			err = srv.Run(ctx, &mcp.StdioTransport{In: ios.In, Out: ios.Out, Logger: log})
			if err != nil && ctx.Err() == nil {
				return failErr(fmt.Errorf("mcp server: %w", err))
			}
			return nil
		},
	}
}

// mcpServerOptions are the options of Maestro's MCP server, over stdio
// (maestro mcp) or HTTP (maestro serve's /mcp): tasks are runs of exe,
// pieces those of the task's workspace.
func mcpServerOptions(ios *IOStreams, exe string, log *slog.Logger) mcp.ServerOptions {
	return mcp.ServerOptions{
		Exe: exe, Env: os.Environ(), Version: versionString(), Logger: log,
		Pieces: func(ctx context.Context, ws string) ([]mcp.PieceInfo, error) {
			lib, err := loadLibrary(ctx, ios, ws)
			if err != nil {
				return nil, err
			}
			var out []mcp.PieceInfo
			for _, e := range lib.Catalog().List() {
				out = append(out, mcp.PieceInfo{Name: e.Piece.Name, Description: e.Piece.Description, Source: sourceLabel(e)})
			}
			return append(out, ignoredPieces(lib)...), nil
		},
	}
}

// ignoredPieces are the piece files the catalog of lib ignored, named by
// the piece they define (an untrusted one) or would define (an invalid
// one: its file's name), with the reason.
func ignoredPieces(lib *engine.Library) []mcp.PieceInfo {
	var out []mcp.PieceInfo
	for _, err := range lib.Catalog().Problems() {
		info := mcp.PieceInfo{Ignored: err.Error()}
		if u, ok := errors.AsType[*piece.UntrustedError](err); ok {
			info.Name, info.Source = u.Name, u.File
		} else if perr, ok := errors.AsType[*piece.Errors](err); ok && len(perr.List) > 0 {
			info.Source = perr.List[0].File
			info.Name = strings.TrimSuffix(filepath.Base(info.Source), filepath.Ext(info.Source))
		}
		out = append(out, info)
	}
	return out
}
