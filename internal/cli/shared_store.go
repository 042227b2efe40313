package cli

import (
	"strings"
	"unicode"
	"unicode/utf8"
)

// maxNameBytes bounds serve's and worker's --name: a job's lease owner is
// NAME/N (one per slot) and the store's labels hold 128 bytes, as does
// the artifact location's recorder ("worker NAME").
const maxNameBytes = 100

// checkName checks --name before anything opens (empty: host:pid). A name
// the store cannot record was found late: on PostgreSQL, exit 1 with the
// store's words about another field ('record setting "artifacts": by:
// expected at most 128 bytes'); on SQLite the process started and every
// claim failed, so no job ever ran.
func checkName(name string) error {
	switch {
	case name == "":
		return nil
	case strings.TrimSpace(name) == "":
		return usageErr("--name: expected a name such as worker-1, found only spaces (leave it out for host:pid)")
	case len(name) > maxNameBytes:
		return usageErr("--name: expected at most %d bytes (a job's lease owner is NAME/N), found %d", maxNameBytes, len(name))
	case !utf8.ValidString(name) || strings.IndexFunc(name, unicode.IsControl) >= 0:
		return usageErr("--name %q: expected one line of text, without control characters", name)
	}
	return nil
}

// moveArtifactsFlag is the help of serve's and worker's --move-artifacts.
const moveArtifactsFlag = "record this process's artifact location (--artifacts) as the one every process on this PostgreSQL database uses, replacing the recorded one: after copying the files there and stopping every process that used the old one (docs/scale-out.md, \"One artifact location\")"

// artifactsFrom says where a process's artifact location was set: its
// --artifacts flag, else config.yaml's artifacts (host.Artifacts' order),
// else "" (unset).
func artifactsFrom(flag, configured, configPath string) string {
	switch {
	case flag != "":
		return "--artifacts"
	case configured != "":
		return "artifacts in " + configPath
	}
	return ""
}
