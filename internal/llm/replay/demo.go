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
	return s
}
