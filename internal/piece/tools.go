package piece

import (
	"slices"
	"strings"
)

// ToolInfo describes one tool name the validator accepts in allowed_tools.
type ToolInfo struct {
	// Name is the tool name as written in allowed_tools.
	Name string
	// Group is a coarse family: control, workspace, web, documents,
	// slides, knowledge, media, pieces, ssh, subtasks, interaction, docs.
	Group string
	// Implemented reports whether this build of Maestro ships the tool.
	// Unimplemented tools validate (so pieces can be written ahead of
	// them) but are not offered to the model until they exist.
	Implemented bool
	// Summary is a one-line description for documentation and editors.
	Summary string
}

// KnownTools returns the tool inventory the validator accepts in
// allowed_tools, in documentation order. MCP tools are not listed: they are
// accepted by pattern (mcp__*, mcp__<server>__*, mcp__<server>__<tool>).
// The returned slice is fresh; callers may modify it.
func KnownTools() []ToolInfo {
	return []ToolInfo{
		{"transition", "control", true, "hop to a movement named in the current rules[].next, carrying a summary and lessons"},
		{"complete", "control", true, "end the run: success, aborted or needs_user_input; its result is the only output the user sees"},
		{"Read", "workspace", true, "read a workspace file, optionally a line range"},
		{"Write", "workspace", true, "create or overwrite a workspace file (needs edit: true)"},
		{"Edit", "workspace", true, "replace text in a workspace file (needs edit: true)"},
		{"Glob", "workspace", true, "list workspace files matching a glob pattern"},
		{"Grep", "workspace", true, "search workspace files with a regular expression"},
		{"Bash", "workspace", true, "run a sandboxed shell command from the command allowlist"},
		{"WebSearch", "web", true, "search the web; returns titles, URLs and snippets"},
		{"WebFetch", "web", true, "fetch a web page's text, behind the SSRF guard"},
		{"BrowseWeb", "web", false, "drive a browser, optionally with a saved per-user session"},
		{"DownloadFile", "web", true, "download a URL into input/ or output/, behind the SSRF guard"},
		{"ReadImage", "media", false, "show a workspace image to a vision-capable model"},
		{"ReadPdf", "documents", false, "extract text from a PDF, by page range or query"},
		{"ReadExcel", "documents", false, "read a spreadsheet"},
		{"ReadDocx", "documents", false, "read a Word document"},
		{"ReadPPTX", "documents", false, "read a PowerPoint deck"},
		{"PdfToImages", "documents", false, "render PDF pages to images"},
		{"SplitExcelSheets", "documents", false, "split a workbook into one file per sheet"},
		{"SplitDocxSections", "documents", false, "split a Word document into sections"},
		{"SetTheme", "slides", false, "choose the slide deck theme"},
		{"AddSlide", "slides", false, "append a slide with a layout, content and notes"},
		{"BuildPptx", "slides", false, "build the .pptx from the slides added so far"},
		{"ResetSlides", "slides", false, "discard the slides, keeping the theme"},
		{"SearchKnowledge", "knowledge", false, "vector search over the document knowledge service"},
		{"ListNamespaces", "knowledge", false, "list knowledge namespaces"},
		{"ListDocuments", "knowledge", false, "list documents of a knowledge namespace"},
		{"IngestDocument", "knowledge", false, "add a document to the knowledge service"},
		{"IngestStatus", "knowledge", false, "report the progress of an ingestion"},
		{"GetYouTubeTranscript", "media", false, "fetch a YouTube video's captions"},
		{"TranscribeAudio", "media", false, "transcribe an audio file"},
		{"ListPieces", "pieces", true, "list the pieces in the catalog"},
		{"GetPiece", "pieces", true, "return a piece's YAML"},
		{"CreatePiece", "pieces", true, "validate and store a new piece from YAML"},
		{"UpdatePiece", "pieces", true, "validate and replace a whole piece from YAML"},
		{"SshExec", "ssh", true, "run a command on a registered SSH connection"},
		{"SshUpload", "ssh", true, "upload a workspace file over SSH"},
		{"SshDownload", "ssh", true, "download a remote file into the workspace over SSH"},
		{"SpawnSubTask", "subtasks", true, "start a child job; results land in subtasks/"},
		{"AskUser", "interaction", false, "ask the user a question and wait for the answer"},
		{"ReadToolDoc", "docs", true, "read a tool's detailed usage guide"},
		{"ReadSkill", "docs", true, "materialise a skill's files into skills/"},
	}
}

// isKnownTool reports whether name is in [KnownTools]. It is a switch so
// the validator's hot path needs no table built at run time; a test keeps
// the two lists identical.
func isKnownTool(name string) bool {
	switch name {
	case "transition", "complete",
		"Read", "Write", "Edit", "Glob", "Grep", "Bash",
		"WebSearch", "WebFetch", "BrowseWeb", "DownloadFile",
		"ReadImage", "ReadPdf", "ReadExcel", "ReadDocx", "ReadPPTX",
		"PdfToImages", "SplitExcelSheets", "SplitDocxSections",
		"SetTheme", "AddSlide", "BuildPptx", "ResetSlides",
		"SearchKnowledge", "ListNamespaces", "ListDocuments", "IngestDocument", "IngestStatus",
		"GetYouTubeTranscript", "TranscribeAudio",
		"ListPieces", "GetPiece", "CreatePiece", "UpdatePiece",
		"SshExec", "SshUpload", "SshDownload",
		"SpawnSubTask", "AskUser", "ReadToolDoc", "ReadSkill":
		return true
	}
	return false
}

// isSSHTool reports whether name is one of the tools that require
// allowed_ssh_connections.
func isSSHTool(name string) bool {
	return name == "SshExec" || name == "SshUpload" || name == "SshDownload"
}

// mcpPrefix starts every MCP tool name.
const mcpPrefix = "mcp__"

// checkMCPTool validates an allowed_tools entry that starts with mcp__ and
// returns a message describing the problem, or "" when it is well formed.
// Accepted: "mcp__*" (every tool of every connected server),
// "mcp__<server>__*" and "mcp__<server>__<tool>", where <server> is a
// required_mcp-style slug and <tool> is 1–128 of [A-Za-z0-9_.-].
func checkMCPTool(s string) string {
	rest := s[len(mcpPrefix):]
	if rest == "*" {
		return ""
	}
	const want = `expected "mcp__*", "mcp__<server>__*" or "mcp__<server>__<tool>"`
	server, tool, ok := strings.Cut(rest, "__")
	if !ok {
		return want + `, found "` + s + `" (no "__" after the server)`
	}
	if !isSlug(server, 64, true) {
		return want + ` with <server> matching [a-z0-9_-]{1,64}, found server "` + server + `"`
	}
	if tool == "*" {
		return ""
	}
	if tool == "" || len(tool) > 128 || !allBytes(tool, isToolNameByte) {
		return want + ` with <tool> matching [A-Za-z0-9_.-]{1,128} or "*", found tool "` + tool + `"`
	}
	return ""
}

func isToolNameByte(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '.' || c == '-'
}

// UnavailableTools lists the allowed_tools entries of m that this build of
// Maestro lacks: known tools not implemented yet ([ToolInfo].Implemented
// false). The engine leaves them out when the movement runs. MCP patterns
// are not listed: their tools come from the configured servers
// (docs/mcp.md), and a run reports a pattern no server serves.
func (m *Movement) UnavailableTools() []string {
	return m.missingTools(func(string) bool { return true })
}

// MissingTools lists the allowed_tools entries of m that a run with the
// MCP servers servers (the slugs configured in config.yaml) would lack:
// the tools this build lacks ([Movement.UnavailableTools]) and the MCP
// patterns no configured server can serve — "mcp__*" when there is no
// server, "mcp__<server>__…" when <server> is not configured. Whether a
// configured server offers a named tool is known only once it runs.
func (m *Movement) MissingTools(servers []string) []string {
	return m.missingTools(func(pattern string) bool { return mcpServable(pattern, servers) })
}

// missingTools lists m's allowed_tools entries that are not implemented,
// or that are MCP patterns servable says no server serves.
func (m *Movement) missingTools(servable func(pattern string) bool) []string {
	implemented := map[string]bool{}
	for _, t := range KnownTools() {
		implemented[t.Name] = t.Implemented
	}
	var out []string
	for _, name := range m.AllowedTools {
		if strings.HasPrefix(name, mcpPrefix) {
			if !servable(name) {
				out = append(out, name)
			}
		} else if !implemented[name] {
			out = append(out, name)
		}
	}
	return out
}

// mcpServable reports whether one of servers could serve the MCP pattern
// (mcp__*, mcp__<server>__*, mcp__<server>__<tool>).
func mcpServable(pattern string, servers []string) bool {
	rest := strings.TrimPrefix(pattern, mcpPrefix)
	if rest == "*" {
		return len(servers) > 0
	}
	server, _, _ := strings.Cut(rest, "__")
	return slices.Contains(servers, server)
}

// UnavailableTools lists, without repeats and in movement order, the tools
// p's movements name that this build lacks ([Movement.UnavailableTools]).
func (p *Piece) UnavailableTools() []string {
	return p.eachMovement((*Movement).UnavailableTools)
}

// MissingTools lists, without repeats and in movement order, the tools
// p's movements name that a run with the MCP servers servers would lack
// ([Movement.MissingTools]).
func (p *Piece) MissingTools(servers []string) []string {
	return p.eachMovement(func(m *Movement) []string { return m.MissingTools(servers) })
}

// eachMovement gathers what list returns for each of p's movements,
// without repeats, in movement order.
func (p *Piece) eachMovement(list func(*Movement) []string) []string {
	var out []string
	for i := range p.Movements {
		for _, name := range list(&p.Movements[i]) {
			if !slices.Contains(out, name) {
				out = append(out, name)
			}
		}
	}
	return out
}

// MissingMCP lists the servers p's required_mcp names that are not among
// servers (a run of p fails before its first movement).
func (p *Piece) MissingMCP(servers []string) []string {
	var out []string
	for _, slug := range p.RequiredMCP {
		if !slices.Contains(servers, slug) {
			out = append(out, slug)
		}
	}
	return out
}
