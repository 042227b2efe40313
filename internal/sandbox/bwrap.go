package sandbox

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// systemLinkDirs are the top-level directories that Debian (merged /usr)
// makes symlinks into /usr; older layouts have real directories.
var systemLinkDirs = []string{"/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32"}

// etcEntries are the /etc files and directories programs commonly need;
// each is bound read-only if present.
var etcEntries = []string{
	"/etc/alternatives",    // Debian's awk, editor, … symlinks
	"/etc/ssl",             // CA certificates
	"/etc/ca-certificates", //
	"/etc/passwd",          // user and group names for id, ls -l, git
	"/etc/group",           //
	"/etc/nsswitch.conf",   //
	"/etc/ld.so.cache",     // dynamic linker
	"/etc/ld.so.conf",      //
	"/etc/ld.so.conf.d",    //
	"/etc/localtime",       // time zone
	"/etc/gitconfig",       // git reads it and fails if it exists but cannot be read
	"/etc/mime.types",      // Python mimetypes
	"/etc/python3",         // Debian's python site configuration
	"/etc/python3.11",      // (bookworm)
	"/etc/python3.12",      //
	"/etc/python3.13",      //
}

// networkEtcEntries are added when the network is shared.
var networkEtcEntries = []string{"/etc/resolv.conf", "/etc/hosts", "/etc/host.conf", "/etc/gai.conf"}

// sandboxPath is PATH inside the sandbox and in the fallback.
const sandboxPath = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

// probeBwrap finds bubblewrap and checks that it can actually build a
// sandbox here. The error completes the sentence "bubblewrap is required …
// but …".
func probeBwrap(ctx context.Context, path, shell string) (bin, version string, err error) {
	if path == "" {
		for _, p := range bwrapSystemPaths() {
			if fi, err := os.Stat(p); err == nil && !fi.IsDir() {
				bin = p
				break
			}
		}
		if bin == "" {
			return "", "", fmt.Errorf("bwrap was not found at %s (PATH is not searched; set the bubblewrap path to use another)", strings.Join(bwrapSystemPaths(), ", "))
		}
	} else {
		bin = path
	}
	fi, err := os.Stat(bin)
	if err != nil {
		return "", "", fmt.Errorf("bwrap was not found at %s", truncate(bin, 256))
	}
	if fi.IsDir() || fi.Mode().Perm()&0o111 == 0 {
		return "", "", fmt.Errorf("%s is not an executable file", truncate(bin, 256))
	}
	if abs, err := filepath.Abs(bin); err == nil {
		bin = abs
	}

	out, err := runProbe(ctx, bin, "--version")
	if err != nil {
		return "", "", fmt.Errorf("`%s --version` failed: %w", bin, err)
	}
	version = strings.TrimSpace(out)

	args := []string{"--die-with-parent", "--new-session", "--unshare-all", "--cap-drop", "ALL"}
	args = append(args, systemBinds()...)
	args = append(args, "--tmpfs", "/tmp", "--proc", "/proc", "--dev", "/dev", "--remount-ro", "/",
		"--clearenv", "--", shell, "-c", "true")
	if _, err := runProbe(ctx, bin, args...); err != nil {
		return "", "", fmt.Errorf("a trial sandboxed run failed (%w); user namespaces may be disabled on this host", err)
	}
	return bin, version, nil
}

// runProbe runs a short probe command with a bounded timeout and returns
// its combined output.
func runProbe(ctx context.Context, bin string, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, probeTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Env = []string{}
	var out bytes.Buffer
	cmd.Stdout = &out
	cmd.Stderr = &out
	setProcessGroup(cmd)
	err := cmd.Run()
	if ctx.Err() != nil {
		return out.String(), fmt.Errorf("timed out after %s", probeTimeout)
	}
	if err != nil {
		msg := strings.TrimSpace(out.String())
		if msg == "" {
			return "", err
		}
		return "", fmt.Errorf("%w: %s", err, msg)
	}
	return out.String(), nil
}

// systemBinds returns the bwrap arguments that make the host's system
// directories visible read-only.
func systemBinds() []string {
	args := []string{"--ro-bind", "/usr", "/usr"}
	for _, d := range systemLinkDirs {
		fi, err := os.Lstat(d)
		if err != nil {
			continue
		}
		switch {
		case fi.Mode()&os.ModeSymlink != 0:
			target, err := os.Readlink(d)
			if err != nil {
				continue
			}
			args = append(args, "--symlink", target, d)
		case fi.IsDir():
			args = append(args, "--ro-bind", d, d)
		}
	}
	for _, e := range etcEntries {
		args = append(args, "--ro-bind-try", e, e)
	}
	return args
}

// bwrapArgs returns the full bubblewrap argument list for one command.
func (s *Sandbox) bwrapArgs(ws workspace, command string, extra map[string]string) []string {
	args := []string{"--die-with-parent", "--new-session", "--unshare-all"}
	if s.network {
		args = append(args, "--share-net")
	}
	args = append(args, "--cap-drop", "ALL")
	args = append(args, s.systemArgs...)
	if s.network {
		for _, e := range networkEtcEntries {
			args = append(args, "--ro-bind-try", e, e)
		}
	}
	// /tmp first: the workspace may live under /tmp and its bind must land
	// on top of the private tmpfs.
	args = append(args,
		"--tmpfs", "/tmp",
		"--proc", "/proc",
		"--dev", "/dev",
		"--bind", ws.real, ws.path,
		"--chdir", ws.path,
		"--remount-ro", "/",
		"--clearenv",
	)
	for _, kv := range envList(s.sandboxEnv(ws.path, "/tmp", extra)) {
		k, v, _ := strings.Cut(kv, "=")
		args = append(args, "--setenv", k, v)
	}
	return append(args, "--", s.shell, "-c", command)
}
