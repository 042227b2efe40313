package agentcli

import (
	"context"
	"errors"
	"strings"
)

// Sources of an Info.
const (
	SourceBuiltin  = "built-in"
	SourceUserFile = "user file"
	// SourceOverride is a user file whose id replaces a built-in.
	SourceOverride = "override"
)

// Info describes one agent CLI definition and its detected binary: what
// `maestro agents list --json` prints and GET /api/v1/agents answers.
type Info struct {
	ID   string `json:"id"`
	Name string `json:"name"`
	// Source is SourceBuiltin, SourceUserFile or SourceOverride; File is
	// the user file.
	Source string `json:"source"`
	File   string `json:"file,omitempty"`
	Binary string `json:"binary"`
	// Path and Version are the detected binary's; empty when it is not
	// installed (Version also when its version probe failed).
	Path    string `json:"path,omitempty"`
	Version string `json:"version,omitempty"`
	// Unusable, with no Path, is the file that is there but cannot be run
	// and why ("/opt/bin/x: not executable (chmod +x /opt/bin/x)").
	Unusable       string `json:"unusable,omitempty"`
	Parser         string `json:"parser"`
	SessionStorage string `json:"session_storage,omitempty"`
	// Capabilities has every capability flag by its YAML name.
	Capabilities map[string]bool `json:"capabilities"`
}

// Describe returns def's Info, detecting its binary on path (a PATH-style
// list, as Detect).
func Describe(ctx context.Context, def *Definition, path string) Info {
	return describe(def, Detect(ctx, def, path))
}

// DescribeAll is Describe of every definition, their binaries probed at
// the same time (DetectAll); the detections are returned too, for their
// errors.
func DescribeAll(ctx context.Context, defs []*Definition, path string) ([]Info, []Detection) {
	dets := DetectAll(ctx, defs, path)
	out := make([]Info, len(defs))
	for i, def := range defs {
		out[i] = describe(def, dets[i])
	}
	return out, dets
}

func describe(def *Definition, det Detection) Info {
	info := Info{ID: def.ID, Name: def.Name, Source: SourceBuiltin, Binary: def.Binary, Parser: def.Parser,
		SessionStorage: def.SessionStorage, Capabilities: map[string]bool{}}
	if !strings.HasPrefix(def.Source, "builtin:") {
		info.Source, info.File = SourceUserFile, def.Source
		if def.Overrides {
			info.Source = SourceOverride
		}
	}
	for _, f := range def.Capabilities.Flags() {
		info.Capabilities[f.Name] = f.On
	}
	info.Path, info.Version = det.Path, det.Version
	if u, ok := errors.AsType[*UnusableError](det.Err); ok && det.Path == "" {
		info.Unusable = u.Error()
	}
	return info
}
