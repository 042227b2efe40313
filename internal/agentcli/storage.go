package agentcli

// StorageNames lists the session storages a definition may name.
func StorageNames() []string {
	return []string{"claude-projects", "codex-rollouts", "gemini-chats", "opencode-sqlite", "qwen-projects", "none"}
}
