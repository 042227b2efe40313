package cli

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
