package llm

import (
	"slices"
	"strings"
)

// ModelInfo is what Maestro knows about a model: its context window and
// its list prices in US dollars per million tokens.
type ModelInfo struct {
	ID            string
	Provider      string
	ContextWindow int64
	Input         float64
	Output        float64
	CacheRead     float64
	CacheWrite    float64
}

// catalogue returns the known models. Prices are list prices per million
// tokens; IDs match exactly or as a prefix of a dated id
// ("claude-sonnet-4-5-20250929" matches "claude-sonnet-4-5").
func catalogue() []ModelInfo {
	return []ModelInfo{
		{"claude-opus-4-6", "anthropic", 200_000, 5, 25, 0.5, 6.25},
		{"claude-opus-4-5", "anthropic", 200_000, 5, 25, 0.5, 6.25},
		{"claude-opus-4-1", "anthropic", 200_000, 15, 75, 1.5, 18.75},
		{"claude-opus-4", "anthropic", 200_000, 15, 75, 1.5, 18.75},
		{"claude-sonnet-4-6", "anthropic", 200_000, 3, 15, 0.3, 3.75},
		{"claude-sonnet-4-5", "anthropic", 200_000, 3, 15, 0.3, 3.75},
		{"claude-sonnet-4", "anthropic", 200_000, 3, 15, 0.3, 3.75},
		{"claude-3-7-sonnet", "anthropic", 200_000, 3, 15, 0.3, 3.75},
		{"claude-haiku-4-5", "anthropic", 200_000, 1, 5, 0.1, 1.25},
		{"claude-3-5-haiku", "anthropic", 200_000, 0.8, 4, 0.08, 1},
		{"gpt-5", "openai", 400_000, 1.25, 10, 0.125, 0},
		{"gpt-5-mini", "openai", 400_000, 0.25, 2, 0.025, 0},
		{"gpt-5-nano", "openai", 400_000, 0.05, 0.4, 0.005, 0},
		{"gpt-4.1", "openai", 1_047_576, 2, 8, 0.5, 0},
		{"gpt-4.1-mini", "openai", 1_047_576, 0.4, 1.6, 0.1, 0},
		{"gpt-4.1-nano", "openai", 1_047_576, 0.1, 0.4, 0.025, 0},
		{"gpt-4o", "openai", 128_000, 2.5, 10, 1.25, 0},
		{"gpt-4o-mini", "openai", 128_000, 0.15, 0.6, 0.075, 0},
		{"o3", "openai", 200_000, 2, 8, 0.5, 0},
		{"o4-mini", "openai", 200_000, 1.1, 4.4, 0.275, 0},
	}
}

// LookupModel finds a model by exact id, else by the longest known id that
// prefixes it followed by "-" (dated snapshots).
func LookupModel(id string) (ModelInfo, bool) {
	var best ModelInfo
	found := false
	for _, m := range catalogue() {
		if m.ID == id {
			return m, true
		}
		if strings.HasPrefix(id, m.ID+"-") && len(m.ID) > len(best.ID) {
			best, found = m, true
		}
	}
	return best, found
}

// KnownModels lists the catalogue's model ids for a provider, sorted.
func KnownModels(provider string) []string {
	var ids []string
	for _, m := range catalogue() {
		if provider == "" || m.Provider == provider {
			ids = append(ids, m.ID)
		}
	}
	slices.Sort(ids)
	return ids
}

// Cost prices usage for a model. known is false when the model is not in
// the catalogue; the cost is then 0 and callers should say so.
func Cost(model string, u Usage) (usd float64, known bool) {
	m, ok := LookupModel(model)
	if !ok {
		return 0, false
	}
	const perM = 1e6
	usd = float64(u.InputTokens)*m.Input/perM +
		float64(u.OutputTokens)*m.Output/perM +
		float64(u.CacheReadTokens)*m.CacheRead/perM +
		float64(u.CacheWriteTokens)*m.CacheWrite/perM
	return usd, true
}
