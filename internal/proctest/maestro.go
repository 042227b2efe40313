package proctest

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
)

// buildTimeout bounds one go build of a command of the module.
const buildTimeout = 5 * time.Minute

// Build builds the command of the module in pkg (a path from the module
// root, such as "cmd/maestro") into dir, and returns the binary's path.
func Build(ctx context.Context, pkg, dir string) (string, error) {
	root, err := moduleRoot()
	if err != nil {
		return "", fmt.Errorf("build %s: %w", pkg, err)
	}
	bin := filepath.Join(dir, filepath.Base(pkg))
	ctx, cancel := context.WithTimeout(ctx, buildTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, "go", "build", "-o", bin, "./"+filepath.ToSlash(pkg))
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("build %s: %w\n%s", pkg, err, out)
	}
	return bin, nil
}

// NoModelEnv is the environment of a machine with no model configured and
// Maestro's home in home: this process's environment without model
// credentials, endpoints or choice, for a maestro subprocess.
func NoModelEnv(home string) []string {
	var env []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		switch k {
		case "ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN", "ANTHROPIC_BASE_URL", "OPENAI_API_KEY", "OPENAI_BASE_URL", "MAESTRO_MODEL", "MAESTRO_HOME":
			continue
		}
		env = append(env, kv)
	}
	return append(env, "MAESTRO_HOME="+home)
}
