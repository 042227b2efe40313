package skills

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"strings"

	"github.com/maestro-run/maestro/internal/store"
	"github.com/maestro-run/maestro/internal/tool"
	"github.com/maestro-run/maestro/internal/workspace"
)

// ReadSkillInput is the input of the ReadSkill tool.
type ReadSkillInput struct {
	Name string `json:"name" jsonschema:"the skill's name, as the tool's description lists it"`
}

// NewReadSkill returns the ReadSkill tool over l writing into root: it
// copies a skill into skills/<name>/ and answers with the paths written
// and the skill's SKILL.md. Its description lists the skills available
// when it is built.
func NewReadSkill(ctx context.Context, l *Library, root *workspace.Root) (tool.Tool, error) {
	infos, err := l.List(ctx)
	if err != nil {
		return nil, err
	}
	desc := "Copy a skill (instructions and files) into skills/<name>/ and read its SKILL.md. " + Summary(infos) +
		` ReadToolDoc("ReadSkill") has the details.`
	return tool.New("ReadSkill", desc, false, func(ctx context.Context, in ReadSkillInput, _ tool.Call) (tool.Result, error) {
		written, err := l.Materialize(ctx, in.Name, root)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			names := make([]string, 0, len(infos))
			for _, s := range infos {
				names = append(names, s.Name)
			}
			return tool.Failf(tool.CodeNotFound, "ReadSkill: no skill %q (available: %s)", in.Name, strings.Join(names, ", ")), nil
		case errors.Is(err, workspace.ErrOutside):
			return tool.Failf(tool.CodeWorkspaceViolation, "ReadSkill: %s", workspace.Excerpt(err.Error())), nil
		case err != nil:
			return tool.Errorf("ReadSkill: %s", workspace.Excerpt(err.Error())), nil
		}
		md, err := root.ReadFileMax(path.Join(Dir, in.Name, store.SkillFile), store.MaxSkillBytes)
		if err != nil {
			return tool.Errorf("ReadSkill: read back %s: %s", store.SkillFile, workspace.Excerpt(err.Error())), nil
		}
		return tool.Result{Content: fmt.Sprintf("Skill %s is in %s/%s/ (%d files):\n%s\n\n%s", in.Name, Dir, in.Name, len(written),
			strings.Join(written, "\n"), md)}, ctx.Err()
	}), nil
}
