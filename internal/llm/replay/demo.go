package replay

import (
	_ "embed"
	"fmt"
	"slices"
)

// DemoName is the name the bundled demo scenario is parsed under.
const DemoName = "demo.yaml"

//go:embed demo.yaml
var demoYAML []byte

// DemoSource returns the bundled demo scenario file (YAML).
func DemoSource() []byte { return slices.Clone(demoYAML) }

// Demo returns the bundled demo scenario: it announces that it is a
// scripted replay, writes two files under hello-maestro/ with Write,
// inspects them with Bash (ls, wc) and Read, and ends by explaining how to
// configure a real model. Its assertions check the files it writes.
func Demo() *Scenario {
	s, err := Parse(demoYAML, DemoName)
	if err != nil {
		// The embedded file is tested; reaching this is a build defect.
		panic(fmt.Sprintf("bundled replay demo is invalid: %v", err))
	}
	s.bundled = true
	return s
}

// demoGoOn is how the bundled demo's script errors end: what a user does
// once the demo cannot play on.
const demoGoOn = "Start a new session to play it again, or configure a real model " +
	"(ANTHROPIC_API_KEY, OPENAI_API_KEY or OPENAI_BASE_URL, or --model provider/model)"

// DemoPieceName is the name the bundled piece demo is parsed under.
const DemoPieceName = "demo_piece.yaml"

// DemoPieceFor is the piece the bundled piece demo is written for.
const DemoPieceFor = "general"

//go:embed demo_piece.yaml
var demoPieceYAML []byte

// DemoPieceSource returns the bundled piece demo scenario file (YAML).
func DemoPieceSource() []byte { return slices.Clone(demoPieceYAML) }

// DemoPiece returns the bundled piece demo: the replay demo shaped for a
// piece run of [DemoPieceFor] (frames numbered across the run, movements
// ended by the transition and complete control tools), which is what a
// queued job plays when no model is configured. Its execute movement
// announces the replay, writes two files under output/hello-maestro/ with
// Write, checks them with Bash and Read and transitions to verify; verify
// reads the files and completes with a result that says it was a replay
// and how to configure a real model.
func DemoPiece() *Scenario {
	s, err := Parse(demoPieceYAML, DemoPieceName)
	if err != nil {
		// The embedded file is tested; reaching this is a build defect.
		panic(fmt.Sprintf("bundled replay piece demo is invalid: %v", err))
	}
	return s
}
