// Package piece is Maestro's piece model: the typed form of a piece YAML
// file (a workflow of movements), its one validator, the canonical encoder,
// and the catalog that merges the built-in pieces with user overrides.
//
// Every consumer that accepts a piece — the catalog loader, the piece tools
// (CreatePiece, UpdatePiece), the REST API and the CLI — calls [Parse], so a
// piece is judged by exactly one set of rules. Parse reports every fault of a
// file at once as an [*Errors], each entry carrying file:line:col, the field
// path and what was expected versus found.
//
// The schema is the seed piece schema (docs/spec/seed-piece-schema.md) plus the
// Maestro additions documented in docs/pieces.md. Running pieces is the
// engine's job, not this package's.
package piece

// Sentinels are the reserved transition targets that are not movements.
const (
	// Complete ends the run successfully. Reachable from default_next only;
	// a movement ends the run through the complete tool.
	Complete = "COMPLETE"
	// Abort ends the run as aborted. Reachable from default_next only.
	Abort = "ABORT"
	// Ask suspends the run until the user answers (job status
	// waiting_human). Reachable from default_next only.
	Ask = "ASK"
	// WaitSubtasks suspends the run until every child job spawned with
	// SpawnSubTask is terminal, then resumes the same movement. Allowed in
	// rules[].next and default_next.
	WaitSubtasks = "WAIT_SUBTASKS"
)

// Values of Movement.TextAnswer.
const (
	// TextAnswerResult: after the reminders, the model's last text answer
	// is the run's result (a question answered in text succeeds).
	TextAnswerResult = "result"
	// TextAnswerDefaultNext: after the reminders, the engine applies
	// default_next (the behaviour when text_answer is absent).
	TextAnswerDefaultNext = "default_next"
)

// DefaultMaxConsecutiveRevisits is the loop-detection threshold a movement
// gets when it does not set max_consecutive_revisits: the engine warns as
// the count of consecutive re-entries of one movement approaches it and
// aborts the run past it. Pieces whose loops are expected to run longer
// (an implement ⇄ verify cycle on a large change) raise it per movement.
const DefaultMaxConsecutiveRevisits = 5

// MaxFileSize is the largest piece file Parse accepts, in bytes. Real pieces
// are a few kilobytes; the cap bounds the work an API caller can request.
const MaxFileSize = 1 << 20

// Pos is a 1-based line and column in a piece file. The zero Pos means the
// position is unknown (for example a piece built in code).
type Pos struct {
	Line int
	Col  int
}

// Piece is a validated piece: a named workflow of movements. Values returned
// by [Parse] satisfy every rule of the schema; a Piece built in code is
// checked by encoding it with [Marshal] and parsing the result.
type Piece struct {
	// Name identifies the piece: lowercase letters, digits and hyphens,
	// at most 64 characters. It is also the file stem of an override file.
	Name string `yaml:"name" json:"name"`
	// Description is what the piece classifier reads to choose a piece:
	// when to choose it, when not to, and its preconditions.
	Description string `yaml:"description" json:"description"`
	// MaxMovements caps the number of movements one run executes.
	MaxMovements int `yaml:"max_movements" json:"max_movements"`
	// InitialMovement names the movement a run starts with.
	InitialMovement string `yaml:"initial_movement" json:"initial_movement"`
	// Triggers holds classifier hints; nil when the file has none.
	Triggers *Triggers `yaml:"triggers,omitempty" json:"triggers,omitempty"`
	// RequiredMCP lists MCP server slugs that must be connected for the
	// piece to be offered.
	RequiredMCP []string `yaml:"required_mcp,omitempty" json:"required_mcp,omitempty"`
	// Model is the model the piece's movements run on, as provider/model
	// (or a bare catalogue id); empty means the run's model. A movement's
	// own model wins.
	Model string `yaml:"model,omitempty" json:"model,omitempty"`
	// Movements are the piece's steps, in file order; never empty.
	Movements []Movement `yaml:"movements" json:"movements"`

	// NamePos is where the name value sits in the source file.
	NamePos Pos `yaml:"-" json:"-"`
}

// Triggers are hints for the piece classifier.
type Triggers struct {
	// Keywords are words or phrases that suggest this piece.
	Keywords []string `yaml:"keywords,omitempty" json:"keywords,omitempty"`
}

// Movement is one step of a piece: one agent loop with its own persona,
// instruction, tools and exits.
type Movement struct {
	// Name identifies the movement within its piece.
	Name string `yaml:"name" json:"name"`
	// Agent names an external agent CLI adapter that runs this movement
	// instead of Maestro's own loop; empty means the native loop. Only the
	// slug format is checked here; the adapter registry is checked by the
	// engine.
	Agent string `yaml:"agent,omitempty" json:"agent,omitempty"`
	// Edit exposes the mutating file tools (Write, Edit) to the movement.
	Edit bool `yaml:"edit" json:"edit"`
	// Persona is the system-prompt persona.
	Persona string `yaml:"persona" json:"persona"`
	// Instruction is the movement's task.
	Instruction string `yaml:"instruction" json:"instruction"`
	// AllowedTools are the tools the model may see; never nil after Parse.
	AllowedTools []string `yaml:"allowed_tools" json:"allowed_tools"`
	// AllowedCommands, when non-nil, replaces the default Bash command
	// allowlist; an empty non-nil list allows no command.
	AllowedCommands []string `yaml:"allowed_commands,omitempty" json:"allowed_commands"`
	// AllowedSSHConnections lists the SSH connection ids the movement may
	// use, or "*" for any registered connection. Nil means the field was
	// omitted; both nil and empty deny every connection.
	AllowedSSHConnections []string `yaml:"allowed_ssh_connections,omitempty" json:"allowed_ssh_connections"`
	// Rules are the transitions the model may choose; may be empty.
	Rules []Rule `yaml:"rules" json:"rules"`
	// DefaultNext is the engine's fallback target (context overflow, ASK
	// limit, SpawnSubTask unavailable): a movement or any sentinel; empty
	// when unset.
	DefaultNext string `yaml:"default_next,omitempty" json:"default_next,omitempty"`
	// TextAnswer says what a reply in plain text (no control tool) means
	// once the reminders are spent: [TextAnswerResult] takes the model's
	// last answer as the run's result (status success);
	// [TextAnswerDefaultNext], or empty, applies DefaultNext.
	TextAnswer string `yaml:"text_answer,omitempty" json:"text_answer,omitempty"`
	// Model is the model this movement runs on, as provider/model (or a
	// bare catalogue id); empty means the piece's model, else the run's.
	Model string `yaml:"model,omitempty" json:"model,omitempty"`
	// MaxConsecutiveRevisits overrides [DefaultMaxConsecutiveRevisits];
	// zero means unset.
	MaxConsecutiveRevisits int `yaml:"max_consecutive_revisits,omitempty" json:"max_consecutive_revisits,omitempty"`

	// Pos is where the movement's mapping starts in the source file.
	Pos Pos `yaml:"-" json:"-"`
}

// Rule is one transition a movement offers to the model.
type Rule struct {
	// Condition tells the model when to take this transition.
	Condition string `yaml:"condition" json:"condition"`
	// Next is a movement name or [WaitSubtasks].
	Next string `yaml:"next" json:"next"`

	// Pos is where the rule's mapping starts in the source file.
	Pos Pos `yaml:"-" json:"-"`
}

// Movement returns the movement with the given name.
func (p *Piece) Movement(name string) (*Movement, bool) {
	for i := range p.Movements {
		if p.Movements[i].Name == name {
			return &p.Movements[i], true
		}
	}
	return nil, false
}

// MovementNames lists the names of p's movements, in order.
func (p *Piece) MovementNames() []string {
	names := make([]string, 0, len(p.Movements))
	for _, m := range p.Movements {
		names = append(names, m.Name)
	}
	return names
}

// ModelFor is the model movement m runs on: its own model, else the
// piece's; "" means the run's model.
func (p *Piece) ModelFor(m *Movement) string {
	if m.Model != "" {
		return m.Model
	}
	return p.Model
}

// RevisitLimit is the movement's loop-detection threshold: its
// max_consecutive_revisits, or [DefaultMaxConsecutiveRevisits] when unset.
func (m *Movement) RevisitLimit() int {
	if m.MaxConsecutiveRevisits > 0 {
		return m.MaxConsecutiveRevisits
	}
	return DefaultMaxConsecutiveRevisits
}

// IsSentinel reports whether s is one of the reserved transition targets
// COMPLETE, ABORT, ASK or WAIT_SUBTASKS.
func IsSentinel(s string) bool {
	switch s {
	case Complete, Abort, Ask, WaitSubtasks:
		return true
	}
	return false
}

// Undeletable reports whether a piece may be updated but never deleted:
// the classifier's fallback "general" and the conversational "chat".
func Undeletable(name string) bool {
	return name == "general" || name == "chat"
}
