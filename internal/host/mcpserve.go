package host

import (
	"errors"
	"os"
	"time"
)

// MCPWorkspaces are the workspace rules of `maestro mcp` served over
// HTTP by maestro serve (docs/mcp.md): those of the HTTP attach API's
// sessions, so a client of either reaches the same directories.
// Workspace checks a directory a client names; Fresh makes a new one
// under policy.Workspaces for a task that names none.
func MCPWorkspaces(policy AttachPolicy) (workspace func(string) (string, error), fresh func() (string, error), err error) {
	policy, err = policy.resolve()
	if err != nil {
		return nil, nil, err
	}
	workspace = func(dir string) (string, error) {
		root, herr := policy.open(dir)
		if herr != nil {
			return "", errors.New(herr.Message)
		}
		defer root.Close()
		return root.Dir(), nil
	}
	fresh = func() (string, error) {
		if err := os.MkdirAll(policy.Workspaces, 0o700); err != nil {
			return "", err
		}
		return os.MkdirTemp(policy.Workspaces, time.Now().UTC().Format("20060102-150405-mcp-"))
	}
	return workspace, fresh, nil
}
