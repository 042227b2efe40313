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

// BinaryEnv names a maestro binary already built from this tree
// (scripts/test.sh builds it once and sets this for every test package):
// Build returns it for cmd/maestro instead of linking the same binary again
// in each test package process. Whoever sets it must build it from the tree
// under test; unset, Build builds.
const BinaryEnv = "MAESTRO_TEST_BINARY"

// Build builds the command of the module in pkg (a path from the module
// root, such as "cmd/maestro") into dir, and returns the binary's path.
// For cmd/maestro it returns the binary named by $MAESTRO_TEST_BINARY
// (BinaryEnv) instead when that is set.
func Build(ctx context.Context, pkg, dir string) (string, error) {
	if bin := os.Getenv(BinaryEnv); bin != "" && filepath.ToSlash(filepath.Clean(pkg)) == "cmd/maestro" {
		return prebuilt(bin)
	}
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

// prebuilt checks that bin, the prebuilt binary named by BinaryEnv, is an
// executable file, and returns its absolute path.
func prebuilt(bin string) (string, error) {
	abs, err := filepath.Abs(bin)
	if err != nil {
		return "", fmt.Errorf("prebuilt binary $%s=%s: %w", BinaryEnv, bin, err)
	}
	fi, err := os.Stat(abs)
	if err != nil {
		return "", fmt.Errorf("prebuilt binary $%s: %w", BinaryEnv, err)
	}
	if !fi.Mode().IsRegular() || fi.Mode().Perm()&0o111 == 0 {
		return "", fmt.Errorf("prebuilt binary $%s=%s is not an executable file (mode %s)", BinaryEnv, abs, fi.Mode())
	}
	return abs, nil
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

// MainWithMaestro is a test package's TestMain body for tests that run
// the maestro binary: it builds cmd/maestro into a temporary directory
// (or takes $MAESTRO_TEST_BINARY, as Build does), stores its path in
// *binary, runs run (m.Run, or a wrapper that also stops what the tests
// shared), removes the directory and exits with run's code. A failed
// build exits 2 before any test runs.
func MainWithMaestro(binary *string, run func() int) {
	dir, err := os.MkdirTemp("", "maestro-e2e-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	*binary, err = Build(context.Background(), "cmd/maestro", dir)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.RemoveAll(dir)
		os.Exit(2)
	}
	code := run()
	os.RemoveAll(dir)
	os.Exit(code)
}
