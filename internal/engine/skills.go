package engine

import (
	"context"
	"slices"

	"github.com/maestro-run/maestro/internal/piece"
	"github.com/maestro-run/maestro/internal/skills"
	"github.com/maestro-run/maestro/internal/tool"
)

// addSkillTool adds ReadSkill to set when m lists it and the run has
// skills (Config.Skills): its description lists the skills available now.
func (r *run) addSkillTool(ctx context.Context, m *piece.Movement, set *tool.Set, ctl *movementCtl) []OmittedTool {
	if r.cfg.Skills == nil || !slices.Contains(m.AllowedTools, "ReadSkill") {
		return nil
	}
	t, err := skills.NewReadSkill(ctx, r.cfg.Skills, r.cfg.Workspace)
	if err != nil {
		return []OmittedTool{{Name: "ReadSkill", Reason: "the skills could not be listed: " + err.Error()}}
	}
	set.Add(guarded{Tool: t, ctl: ctl})
	// A skill left out for a mistake is said once a run: the model is not
	// offered it, so it never asks for it and ReadSkill never says why.
	r.skillsNoted.Do(func() {
		for _, err := range r.cfg.Skills.Problems() {
			r.status("skill not offered to the agent: " + err.Error())
		}
	})
	return nil
}
