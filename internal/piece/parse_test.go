package piece

import (
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

// head is a valid piece up to the fields of its only movement "a" that
// every movement needs except allowed_tools and rules: lines 1-9. Cases
// built with one() append the rest of the movement from line 10 on.
const head = `name: p
description: d
max_movements: 3
initial_movement: a
movements:
  - name: a
    edit: false
    persona: x
    instruction: y
`

// one returns head followed by the given movement lines (each indented by
// four spaces by the caller), so the first of them is line 10.
func one(lines ...string) string {
	return head + strings.Join(lines, "\n") + "\n"
}

// errLines parses src and returns the formatted faults, one per line.
func errLines(t *testing.T, src string) []string {
	t.Helper()
	p, err := Parse("f.yaml", []byte(src))
	if err == nil {
		return nil
	}
	if p != nil {
		t.Errorf("Parse returned a piece together with an error")
	}
	var errs *Errors
	if !errors.As(err, &errs) {
		t.Fatalf("Parse error is %T, want *Errors: %v", err, err)
	}
	if len(errs.List) == 0 {
		t.Fatalf("Parse returned an empty *Errors")
	}
	return strings.Split(err.Error(), "\n")
}

func TestParseRejects(t *testing.T) {
	t.Parallel()
	const missingTop = "f.yaml:1:1: name: required field is missing; expected a piece name of lowercase letters, digits and hyphens"
	tests := []struct {
		name string
		src  string
		want []string
	}{
		// The document as a whole.
		{"empty file", "", []string{
			"f.yaml:1:1: empty document; expected a piece: a mapping with name, description, max_movements, initial_movement and movements",
		}},
		{"only a comment", "# nothing here\n", []string{
			"f.yaml:1:1: empty document; expected a piece: a mapping with name, description, max_movements, initial_movement and movements",
		}},
		{"explicit empty document", "---\n", []string{
			"f.yaml:2:1: empty document; expected a piece: a mapping with name, description, max_movements, initial_movement and movements",
		}},
		{"second document", head + "    allowed_tools: []\n    rules: []\n---\nname: q\n", []string{
			"f.yaml:13:1: found a second YAML document; expected exactly one piece per file",
		}},
		{"unclosed flow list", "name: [a, b\n", []string{
			"f.yaml:2:1: YAML syntax error: did not find expected ',' or ']' (while parsing a flow sequence started at 1:7)",
		}},
		{"tab indentation", "name: p\nmovements:\n\t- name: a\n", []string{
			"f.yaml:3:1: YAML syntax error: found character that cannot start any token (while scanning for the next token); tabs cannot indent YAML, use spaces",
		}},
		{"top level is a list", "- name: p\n", []string{
			"f.yaml:1:1: expected a piece (a mapping of fields), found a list",
		}},
		{"top level is a string", "hello\n", []string{
			`f.yaml:1:1: expected a piece (a mapping of fields), found string "hello"`,
		}},
		{"file too large", "name: p\n" + strings.Repeat("#", MaxFileSize), []string{
			"f.yaml: file is 1048584 bytes; expected at most 1048576 bytes",
		}},

		// Mapping structure at any level.
		{"every required top-level field missing", "model: openai/m\n", []string{
			missingTop,
			"f.yaml:1:1: description: required field is missing; expected a non-empty string telling the classifier when to choose this piece",
			"f.yaml:1:1: max_movements: required field is missing; expected a positive integer",
			"f.yaml:1:1: initial_movement: required field is missing; expected the name of one of the movements",
			"f.yaml:1:1: movements: required field is missing; expected a non-empty list of movements",
		}},
		{"unknown top-level field, near miss", one("    allowed_tools: []", "    rules: []") + "modle: x\n", []string{
			`f.yaml:12:1: modle: unknown field "modle"; did you mean "model"?`,
		}},
		{"unknown top-level field, no near miss", one("    allowed_tools: []", "    rules: []") + "colour: red\n", []string{
			`f.yaml:12:1: colour: unknown field "colour"; expected one of name, description, max_movements, initial_movement, triggers, required_mcp, model, movements`,
		}},
		{"misspelt required field is reported once", strings.Replace(one("    allowed_tools: []", "    rules: []"), "description:", "descripton:", 1), []string{
			`f.yaml:2:1: descripton: unknown field "descripton"; did you mean "description"?`,
		}},
		{"takt's renamed fields", "name: p\ndescription: d\nmax_steps: 3\ninitial_step: a\nsteps: []\n", []string{
			`f.yaml:3:1: max_steps: unknown field "max_steps"; did you mean "max_movements"?`,
			`f.yaml:4:1: initial_step: unknown field "initial_step"; did you mean "initial_movement"?`,
			`f.yaml:5:1: steps: unknown field "steps"; did you mean "movements"?`,
		}},
		{"duplicate key", one("    allowed_tools: []", "    rules: []") + "name: q\n", []string{
			"f.yaml:12:1: name: duplicate key; first defined at 1:1",
		}},
		{"merge key", one("    allowed_tools: []", "    rules: []") + "<<: {model: m}\n", []string{
			"f.yaml:12:1: <<: merge keys (<<) are not supported; write the fields out, reusing values with anchors and aliases if needed",
		}},
		{"non-string key", one("    allowed_tools: []", "    rules: []") + "? [x]\n: 1\n", []string{
			"f.yaml:12:3: expected a field name, found a list as a key",
		}},

		// name
		{"name with capitals and underscore", strings.Replace(one("    allowed_tools: []", "    rules: []"), "name: p", "name: Code_Review", 1), []string{
			`f.yaml:1:7: name: expected 1-64 lowercase letters, digits and hyphens ([a-z0-9-]), found "Code_Review"`,
		}},
		{"name longer than 64", strings.Replace(one("    allowed_tools: []", "    rules: []"), "name: p", "name: "+strings.Repeat("a", 65), 1), []string{
			`f.yaml:1:7: name: expected 1-64 lowercase letters, digits and hyphens ([a-z0-9-]), found "` + strings.Repeat("a", 60) + `"…`,
		}},
		{"name is a number", strings.Replace(one("    allowed_tools: []", "    rules: []"), "name: p", "name: 42", 1), []string{
			"f.yaml:1:7: name: expected a string, found integer 42 (quote it to make it a string)",
		}},

		// description, model
		{"description null", strings.Replace(one("    allowed_tools: []", "    rules: []"), "description: d", "description:", 1), []string{
			"f.yaml:2:13: description: expected a string, found null",
		}},
		{"description blank", strings.Replace(one("    allowed_tools: []", "    rules: []"), "description: d", `description: "  "`, 1), []string{
			`f.yaml:2:14: description: expected a non-empty string, found string "  "`,
		}},
		{"description is a list", strings.Replace(one("    allowed_tools: []", "    rules: []"), "description: d", "description: [d]", 1), []string{
			"f.yaml:2:14: description: expected a string, found a list",
		}},
		{"model empty", one("    allowed_tools: []", "    rules: []") + `model: ""` + "\n", []string{
			`f.yaml:12:8: model: expected a non-empty string, found string ""`,
		}},
		// A provider Maestro does not have failed only as the movement
		// started; pieces validate said ok.
		{"model of an unknown provider", one("    allowed_tools: []", "    rules: []") + "model: ollama/qwen3\n", []string{
			`f.yaml:12:8: model: unknown provider "ollama" in "ollama/qwen3"; expected one of anthropic, openai, replay`,
		}},
		{"model without a provider", one("    allowed_tools: []", "    rules: []") + "model: qwen3\n", []string{
			`f.yaml:12:8: model: expected provider/model with provider one of anthropic, openai, replay (e.g. anthropic/claude-sonnet-4-5, openai/llama3.2), found "qwen3"`,
		}},

		// max_movements
		{"max_movements zero", strings.Replace(one("    allowed_tools: []", "    rules: []"), "max_movements: 3", "max_movements: 0", 1), []string{
			"f.yaml:3:16: max_movements: expected a positive integer, found integer 0",
		}},
		{"max_movements negative", strings.Replace(one("    allowed_tools: []", "    rules: []"), "max_movements: 3", "max_movements: -2", 1), []string{
			"f.yaml:3:16: max_movements: expected a positive integer, found integer -2",
		}},
		{"max_movements a word", strings.Replace(one("    allowed_tools: []", "    rules: []"), "max_movements: 3", "max_movements: ten", 1), []string{
			`f.yaml:3:16: max_movements: expected a positive integer, found string "ten"`,
		}},
		{"max_movements fractional", strings.Replace(one("    allowed_tools: []", "    rules: []"), "max_movements: 3", "max_movements: 1.5", 1), []string{
			"f.yaml:3:16: max_movements: expected a positive integer, found number 1.5",
		}},
		{"max_movements out of range", strings.Replace(one("    allowed_tools: []", "    rules: []"), "max_movements: 3", "max_movements: 99999999999999999999", 1), []string{
			"f.yaml:3:16: max_movements: expected a positive integer, found number 99999999999999999999",
		}},

		// initial_movement
		{"initial_movement unknown", strings.Replace(one("    allowed_tools: []", "    rules: []"), "initial_movement: a", "initial_movement: b", 1), []string{
			`f.yaml:4:19: initial_movement: expected the name of a movement (a), found "b"`,
		}},
		{"initial_movement near miss", strings.Replace(strings.Replace(one("    allowed_tools: []", "    rules: []"), "initial_movement: a", "initial_movement: plna", 1), "name: a", "name: plan", 1), []string{
			`f.yaml:4:19: initial_movement: expected the name of a movement (plan), found "plna"; did you mean "plan"?`,
		}},
		{"initial_movement is a sentinel", strings.Replace(one("    allowed_tools: []", "    rules: []"), "initial_movement: a", "initial_movement: COMPLETE", 1), []string{
			"f.yaml:4:19: initial_movement: expected the name of a movement, found sentinel COMPLETE; a run must start with a movement",
		}},

		// triggers
		{"triggers is a list", one("    allowed_tools: []", "    rules: []") + "triggers: [a]\n", []string{
			"f.yaml:12:11: triggers: expected a mapping with keywords, found a list",
		}},
		{"triggers unknown field", one("    allowed_tools: []", "    rules: []") + "triggers:\n  keyword: [a]\n", []string{
			`f.yaml:13:3: triggers.keyword: unknown field "keyword"; did you mean "keywords"?`,
		}},
		{"keywords is a string", one("    allowed_tools: []", "    rules: []") + "triggers:\n  keywords: a, b\n", []string{
			`f.yaml:13:13: triggers.keywords: expected a list of strings, found string "a, b"`,
		}},
		{"keyword entries", one("    allowed_tools: []", "    rules: []") + "triggers:\n  keywords: [ssh, 2026, ssh, \"\"]\n", []string{
			"f.yaml:13:19: triggers.keywords[1]: expected a string, found integer 2026 (quote it to make it a string)",
			`f.yaml:13:25: triggers.keywords[2]: duplicate entry "ssh"; first listed at 13:14`,
			`f.yaml:13:30: triggers.keywords[3]: expected a non-empty string, found string ""`,
		}},

		// required_mcp
		{"required_mcp slugs", one("    allowed_tools: []", "    rules: []") + "required_mcp: [github, GitHub, " + strings.Repeat("x", 65) + ", github]\n", []string{
			`f.yaml:12:24: required_mcp[1]: expected an MCP server slug of 1-64 characters [a-z0-9_-], found "GitHub"`,
			`f.yaml:12:32: required_mcp[2]: expected an MCP server slug of 1-64 characters [a-z0-9_-], found "` + strings.Repeat("x", 60) + `"…`,
			`f.yaml:12:99: required_mcp[3]: duplicate entry "github"; first listed at 12:16`,
		}},
		{"required_mcp is a string", one("    allowed_tools: []", "    rules: []") + "required_mcp: github\n", []string{
			`f.yaml:12:15: required_mcp: expected a list of strings, found string "github"`,
		}},

		// movements
		{"movements missing", "name: p\ndescription: d\nmax_movements: 3\ninitial_movement: a\n", []string{
			"f.yaml:1:1: movements: required field is missing; expected a non-empty list of movements",
		}},
		{"movements empty", "name: p\ndescription: d\nmax_movements: 3\ninitial_movement: a\nmovements: []\n", []string{
			"f.yaml:5:12: movements: expected a non-empty list of movements, found an empty list",
		}},
		{"movements is a mapping", "name: p\ndescription: d\nmax_movements: 3\ninitial_movement: a\nmovements:\n  a: {}\n", []string{
			"f.yaml:6:3: movements: expected a non-empty list of movements, found a mapping",
		}},
		{"movement is a string", "name: p\ndescription: d\nmax_movements: 3\ninitial_movement: a\nmovements:\n  - a\n", []string{
			`f.yaml:6:5: movements[0]: expected a movement (a mapping of fields), found string "a"`,
		}},
		{"every required movement field missing", "name: p\ndescription: d\nmax_movements: 3\ninitial_movement: a\nmovements:\n  - agent: codex\n", []string{
			"f.yaml:6:5: movements[0].name: required field is missing; expected a movement name unique within the piece",
			"f.yaml:6:5: movements[0].edit: required field is missing; expected a boolean (true or false); true exposes Write and Edit",
			"f.yaml:6:5: movements[0].persona: required field is missing; expected a non-empty string (the system-prompt persona)",
			"f.yaml:6:5: movements[0].instruction: required field is missing; expected a non-empty string (the movement's task)",
			"f.yaml:6:5: movements[0].allowed_tools: required field is missing; expected a list of tool names (use [] for none)",
			"f.yaml:6:5: movements[0].rules: required field is missing; expected a list of rules (use [] for none)",
		}},
		{"unknown movement fields", one("    allowed_tools: []", "    rules: []", "    persona_name: x", "    defaultNext: a", "    tools: [Read]", "    parallel: []"), []string{
			`f.yaml:12:5: movements[0].persona_name: unknown field "persona_name"; did you mean "persona"?`,
			`f.yaml:13:5: movements[0].defaultNext: unknown field "defaultNext"; did you mean "default_next"?`,
			`f.yaml:14:5: movements[0].tools: unknown field "tools"; did you mean "allowed_tools"?`,
			`f.yaml:15:5: movements[0].parallel: unknown field "parallel"; expected one of name, agent, edit, persona, instruction, allowed_tools, allowed_commands, allowed_ssh_connections, rules, default_next, text_answer, model, max_consecutive_revisits`,
		}},
		{"misspelt required movement field is reported once", one("    allowed_tool: []", "    rules: []"), []string{
			`f.yaml:10:5: movements[0].allowed_tool: unknown field "allowed_tool"; did you mean "allowed_tools"?`,
		}},
		{"duplicate movement field", one("    allowed_tools: []", "    rules: []", "    edit: true"), []string{
			"f.yaml:12:5: movements[0].edit: duplicate key; first defined at 7:5",
		}},

		// movement name, agent
		{"movement name format", strings.Replace(one("    allowed_tools: []", "    rules: []"), "name: a", "name: Plan It", 1), []string{
			`f.yaml:4:19: initial_movement: expected the name of a movement (Plan It), found "a"`,
			`f.yaml:6:11: movements[0].name: expected 1-64 lowercase letters, digits, '_' and '-' ([a-z0-9_-]), found "Plan It"`,
		}},
		{"movement named after a sentinel", strings.Replace(strings.Replace(one("    allowed_tools: []", "    rules: []"), "name: a", "name: ABORT", 1), "initial_movement: a", "initial_movement: ABORT", 1), []string{
			"f.yaml:6:11: movements[0].name: ABORT is a reserved sentinel; expected a movement name of 1-64 lowercase letters, digits, '_' and '-'",
		}},
		{"duplicate movement names", one("    allowed_tools: []", "    rules: []", "  - {name: a, edit: false, persona: x, instruction: y, allowed_tools: [], rules: []}"), []string{
			`f.yaml:12:12: movements[1].name: duplicate movement name "a"; first defined at 6:11`,
		}},
		{"agent format", one("    agent: Claude Code", "    allowed_tools: []", "    rules: []"), []string{
			`f.yaml:10:12: movements[0].agent: expected an agent adapter name of 1-64 characters [a-z0-9_-], found "Claude Code"`,
		}},

		// edit, persona, instruction
		{"edit is yes", strings.Replace(one("    allowed_tools: []", "    rules: []"), "edit: false", "edit: yes", 1), []string{
			`f.yaml:7:11: movements[0].edit: expected a boolean (true or false), found string "yes"`,
		}},
		{"edit is a number", strings.Replace(one("    allowed_tools: []", "    rules: []"), "edit: false", "edit: 1", 1), []string{
			"f.yaml:7:11: movements[0].edit: expected a boolean (true or false), found integer 1",
		}},
		{"persona empty", strings.Replace(one("    allowed_tools: []", "    rules: []"), "persona: x", `persona: ""`, 1), []string{
			`f.yaml:8:14: movements[0].persona: expected a non-empty string, found string ""`,
		}},
		{"persona with a custom tag", strings.Replace(one("    allowed_tools: []", "    rules: []"), "persona: x", "persona: !file x.md", 1), []string{
			"f.yaml:8:14: movements[0].persona: expected a string, found a value tagged !file",
		}},
		{"instruction is a mapping", strings.Replace(one("    allowed_tools: []", "    rules: []"), "instruction: y", "instruction: {text: y}", 1), []string{
			"f.yaml:9:18: movements[0].instruction: expected a string, found a mapping",
		}},

		// allowed_tools
		{"allowed_tools is a string", one("    allowed_tools: Read", "    rules: []"), []string{
			`f.yaml:10:20: movements[0].allowed_tools: expected a list of strings, found string "Read"`,
		}},
		{"allowed_tools null", one("    allowed_tools:", "    rules: []"), []string{
			"f.yaml:10:19: movements[0].allowed_tools: expected a list of strings, found null",
		}},
		{"unknown tools", one("    allowed_tools: [read, WebSerch, Teleport]", "    rules: []"), []string{
			`f.yaml:10:21: movements[0].allowed_tools[0]: unknown tool "read"; did you mean "Read"?`,
			`f.yaml:10:27: movements[0].allowed_tools[1]: unknown tool "WebSerch"; did you mean "WebSearch"?`,
			`f.yaml:10:37: movements[0].allowed_tools[2]: unknown tool "Teleport"; expected a tool listed in docs/pieces.md or an MCP pattern mcp__<server>__*`,
		}},
		{"duplicate and non-string tools", one("    allowed_tools: [Read, 3, Read]", "    rules: []"), []string{
			"f.yaml:10:27: movements[0].allowed_tools[1]: expected a string, found integer 3 (quote it to make it a string)",
			`f.yaml:10:30: movements[0].allowed_tools[2]: duplicate entry "Read"; first listed at 10:21`,
		}},
		{"malformed MCP tools", one("    allowed_tools: [mcp__gh, mcp__Git__*, mcp____x, mcp__gh__has space, mcp__gh__]", "    rules: []"), []string{
			`f.yaml:10:21: movements[0].allowed_tools[0]: expected "mcp__*", "mcp__<server>__*" or "mcp__<server>__<tool>", found "mcp__gh" (no "__" after the server)`,
			`f.yaml:10:30: movements[0].allowed_tools[1]: expected "mcp__*", "mcp__<server>__*" or "mcp__<server>__<tool>" with <server> matching [a-z0-9_-]{1,64}, found server "Git"`,
			`f.yaml:10:43: movements[0].allowed_tools[2]: expected "mcp__*", "mcp__<server>__*" or "mcp__<server>__<tool>" with <server> matching [a-z0-9_-]{1,64}, found server ""`,
			`f.yaml:10:53: movements[0].allowed_tools[3]: expected "mcp__*", "mcp__<server>__*" or "mcp__<server>__<tool>" with <tool> matching [A-Za-z0-9_.-]{1,128} or "*", found tool "has space"`,
			`f.yaml:10:73: movements[0].allowed_tools[4]: expected "mcp__*", "mcp__<server>__*" or "mcp__<server>__<tool>" with <tool> matching [A-Za-z0-9_.-]{1,128} or "*", found tool ""`,
		}},
		{"Write and Edit without edit", one("    allowed_tools: [Read, Write, Edit]", "    rules: []"), []string{
			"f.yaml:10:27: movements[0].allowed_tools[1]: Write needs edit: true, found edit: false; set edit: true or remove Write",
			"f.yaml:10:34: movements[0].allowed_tools[2]: Edit needs edit: true, found edit: false; set edit: true or remove Edit",
		}},

		// allowed_commands
		{"allowed_commands without Bash", one("    allowed_tools: [Read]", "    allowed_commands: [git]", "    rules: []"), []string{
			"f.yaml:11:5: movements[0].allowed_commands: has no effect: Bash is not in allowed_tools; add Bash or remove allowed_commands",
		}},
		{"allowed_commands entries", one("    allowed_tools: [Bash]", "    allowed_commands: [git, git, /bin/ls, rm -rf, -x]", "    rules: []"), []string{
			`f.yaml:11:29: movements[0].allowed_commands[1]: duplicate entry "git"; first listed at 11:24`,
			`f.yaml:11:34: movements[0].allowed_commands[2]: expected a command name (1-64 of [A-Za-z0-9._+-], no spaces or slashes), found "/bin/ls"`,
			`f.yaml:11:43: movements[0].allowed_commands[3]: expected a command name (1-64 of [A-Za-z0-9._+-], no spaces or slashes), found "rm -rf"`,
			`f.yaml:11:51: movements[0].allowed_commands[4]: expected a command name (1-64 of [A-Za-z0-9._+-], no spaces or slashes), found "-x"`,
		}},
		{"allowed_commands is a string", one("    allowed_tools: [Bash]", "    allowed_commands: git", "    rules: []"), []string{
			`f.yaml:11:23: movements[0].allowed_commands: expected a list of strings, found string "git"`,
		}},

		// allowed_ssh_connections
		{"SSH tool without allowed_ssh_connections", one("    allowed_tools: [Read, SshExec, SshDownload]", "    rules: []"), []string{
			`f.yaml:10:27: movements[0].allowed_ssh_connections: required field is missing; expected a list because allowed_tools lists SshExec (connection ids, ["*"] for any, or [] to deny all)`,
		}},
		{"SshUpload alone needs it too", one("    allowed_tools: [SshUpload]", "    rules: []"), []string{
			`f.yaml:10:21: movements[0].allowed_ssh_connections: required field is missing; expected a list because allowed_tools lists SshUpload (connection ids, ["*"] for any, or [] to deny all)`,
		}},
		{"connection ids", one("    allowed_tools: [SshExec]", `    allowed_ssh_connections: ["*", abc, ABCDEF12, 6f9619ff-8b86, 6f9619ff-8b86]`, "    rules: []"), []string{
			`f.yaml:11:36: movements[0].allowed_ssh_connections[1]: expected "*" or a connection id of at least 8 lowercase hex digits and hyphens, found "abc"`,
			`f.yaml:11:41: movements[0].allowed_ssh_connections[2]: expected "*" or a connection id of at least 8 lowercase hex digits and hyphens, found "ABCDEF12"`,
			`f.yaml:11:66: movements[0].allowed_ssh_connections[4]: duplicate entry "6f9619ff-8b86"; first listed at 11:51`,
		}},
		{"allowed_ssh_connections null", one("    allowed_tools: [SshExec]", "    allowed_ssh_connections:", "    rules: []"), []string{
			"f.yaml:11:29: movements[0].allowed_ssh_connections: expected a list of strings, found null",
		}},

		// rules
		{"rules missing", one("    allowed_tools: []"), []string{
			"f.yaml:6:5: movements[0].rules: required field is missing; expected a list of rules (use [] for none)",
		}},
		{"rules is a mapping", one("    allowed_tools: []", "    rules: {}"), []string{
			"f.yaml:11:12: movements[0].rules: expected a list of rules (use [] for none), found a mapping",
		}},
		{"rule is a string", one("    allowed_tools: []", "    rules: [next]"), []string{
			`f.yaml:11:13: movements[0].rules[0]: expected a rule (a mapping with condition and next), found string "next"`,
		}},
		{"rule fields missing and unknown", one("    allowed_tools: []", "    rules:", "      - when: done", "      - nxt: a", "        condition: c"), []string{
			`f.yaml:12:9: movements[0].rules[0].when: unknown field "when"; expected one of condition, next`,
			"f.yaml:12:9: movements[0].rules[0].condition: required field is missing; expected a non-empty string telling the model when to take this rule",
			"f.yaml:12:9: movements[0].rules[0].next: required field is missing; expected a movement name or WAIT_SUBTASKS",
			`f.yaml:13:9: movements[0].rules[1].nxt: unknown field "nxt"; did you mean "next"?`,
		}},
		{"rule next is a terminal sentinel", one("    allowed_tools: []", "    rules:",
			"      - {condition: done, next: COMPLETE}",
			"      - {condition: stuck, next: ABORT}",
			"      - {condition: unclear, next: ASK}"), []string{
			"f.yaml:12:33: movements[0].rules[0].next: COMPLETE is a terminal sentinel, reachable only through the complete tool (status success); expected a movement name or WAIT_SUBTASKS",
			"f.yaml:13:34: movements[0].rules[1].next: ABORT is a terminal sentinel, reachable only through the complete tool (status aborted); expected a movement name or WAIT_SUBTASKS",
			"f.yaml:14:36: movements[0].rules[2].next: ASK is a terminal sentinel, reachable only through the complete tool (status needs_user_input); expected a movement name or WAIT_SUBTASKS",
		}},
		{"rule next unknown", one("    allowed_tools: []", "    rules:", "      - {condition: c, next: b}", "      - {condition: c, next: wait_subtasks}"), []string{
			`f.yaml:12:30: movements[0].rules[0].next: expected a movement name (a) or WAIT_SUBTASKS, found "b"`,
			`f.yaml:13:30: movements[0].rules[1].next: expected a movement name (a) or WAIT_SUBTASKS, found "wait_subtasks"; did you mean "WAIT_SUBTASKS"?`,
		}},
		{"rule condition empty", one("    allowed_tools: []", "    rules:", `      - {condition: "", next: a}`), []string{
			`f.yaml:12:21: movements[0].rules[0].condition: expected a non-empty string, found string ""`,
		}},

		// default_next
		{"default_next unknown", one("    allowed_tools: []", "    rules: []", "    default_next: abort"), []string{
			`f.yaml:12:19: movements[0].default_next: expected a movement name (a) or one of COMPLETE, ABORT, ASK, WAIT_SUBTASKS, found "abort"; did you mean "ABORT"?`,
		}},
		{"default_next is a list", one("    allowed_tools: []", "    rules: []", "    default_next: [a]"), []string{
			"f.yaml:12:19: movements[0].default_next: expected a string, found a list",
		}},

		// text_answer, model
		{"text_answer unknown value", one("    allowed_tools: []", "    rules: []", "    text_answer: answer"), []string{
			`f.yaml:12:18: movements[0].text_answer: expected result or default_next, found "answer"`,
		}},
		{"text_answer a boolean", one("    allowed_tools: []", "    rules: []", "    text_answer: true"), []string{
			"f.yaml:12:18: movements[0].text_answer: expected a string, found boolean true (quote it to make it a string)",
		}},
		{"movement model empty", one("    allowed_tools: []", "    rules: []", `    model: ""`), []string{
			`f.yaml:12:12: movements[0].model: expected a non-empty string, found string ""`,
		}},
		{"movement model of an unknown provider", one("    allowed_tools: []", "    rules: []", "    model: fake/x"), []string{
			`f.yaml:12:12: movements[0].model: unknown provider "fake" in "fake/x"; expected one of anthropic, openai, replay`,
		}},
		{"movement model with no model after the provider", one("    allowed_tools: []", "    rules: []", "    model: openai/"), []string{
			`f.yaml:12:12: movements[0].model: the model after "openai/" is empty`,
		}},
		// An agent movement's model was ignored (the CLI runs on its own).
		{"agent movement with a model", one("    allowed_tools: []", "    rules: []", "    agent: codex", "    model: openai/gpt-5"), []string{
			`f.yaml:13:12: movements[0].model: an agent movement runs on the model of its CLI (codex), which a piece does not choose; remove model: here (maestro run --model codex/MODEL chooses the CLI's model for a run)`,
		}},

		// max_consecutive_revisits
		{"max_consecutive_revisits zero", one("    allowed_tools: []", "    rules: []", "    max_consecutive_revisits: 0"), []string{
			"f.yaml:12:31: movements[0].max_consecutive_revisits: expected a positive integer, found integer 0",
		}},
		{"max_consecutive_revisits a string", one("    allowed_tools: []", "    rules: []", `    max_consecutive_revisits: "3"`), []string{
			`f.yaml:12:31: movements[0].max_consecutive_revisits: expected a positive integer, found string "3"`,
		}},

		// Aliases are reported where they are used.
		{"alias to a bad value", one("    allowed_tools: &t [Read, Nope]", "    rules: []", "  - {name: b, edit: false, persona: x, instruction: y, allowed_tools: *t, rules: []}"), []string{
			`f.yaml:10:30: movements[0].allowed_tools[1]: unknown tool "Nope"; expected a tool listed in docs/pieces.md or an MCP pattern mcp__<server>__*`,
			`f.yaml:10:30: movements[1].allowed_tools[1]: unknown tool "Nope"; expected a tool listed in docs/pieces.md or an MCP pattern mcp__<server>__*`,
		}},
		{"alias used as a scalar is positioned at the alias", one("    allowed_tools: []", "    rules: []") + "model: &m [x]\ntriggers: {keywords: *m}\nx: *m\n", []string{
			"f.yaml:12:8: model: expected a string, found a list",
			`f.yaml:14:1: x: unknown field "x"; expected one of name, description, max_movements, initial_movement, triggers, required_mcp, model, movements`,
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got := errLines(t, tt.src)
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("errors mismatch (-want +got):\n%s\nsource:\n%s", diff, tt.src)
			}
		})
	}
}

// TestParseReportsEveryFaultInOrder checks that one file with many faults
// of different kinds, at different levels, yields all of them sorted by
// position.
func TestParseReportsEveryFaultInOrder(t *testing.T) {
	t.Parallel()
	src := `name: Code_Review
descripton: reviews code
max_movements: 0
initial_movement: plan
triggers:
  keyword: [x]
required_mcp: [GitHub]
movements:
  - name: plan
    edit: yes
    persona: ""
    instruction: plan it
    allowed_tools: [Read, read, mcp__gh, Write, SshExec]
    allowed_commands: [git, "rm -rf"]
    rules:
      - condition: done
        next: COMPLETE
      - condition: retry
        next: planx
      - nxt: plan
    default_next: nowhere
    max_consecutive_revisits: -1
  - name: plan
    edit: false
    persona: p
    instruction: i
    allowed_tools: []
    rules: []
    persona_name: x
`
	want := []string{
		`f.yaml:1:7: name: expected 1-64 lowercase letters, digits and hyphens ([a-z0-9-]), found "Code_Review"`,
		`f.yaml:2:1: descripton: unknown field "descripton"; did you mean "description"?`,
		"f.yaml:3:16: max_movements: expected a positive integer, found integer 0",
		`f.yaml:6:3: triggers.keyword: unknown field "keyword"; did you mean "keywords"?`,
		`f.yaml:7:16: required_mcp[0]: expected an MCP server slug of 1-64 characters [a-z0-9_-], found "GitHub"`,
		`f.yaml:10:11: movements[0].edit: expected a boolean (true or false), found string "yes"`,
		`f.yaml:11:14: movements[0].persona: expected a non-empty string, found string ""`,
		`f.yaml:13:27: movements[0].allowed_tools[1]: unknown tool "read"; did you mean "Read"?`,
		`f.yaml:13:33: movements[0].allowed_tools[2]: expected "mcp__*", "mcp__<server>__*" or "mcp__<server>__<tool>", found "mcp__gh" (no "__" after the server)`,
		`f.yaml:13:49: movements[0].allowed_ssh_connections: required field is missing; expected a list because allowed_tools lists SshExec (connection ids, ["*"] for any, or [] to deny all)`,
		"f.yaml:14:5: movements[0].allowed_commands: has no effect: Bash is not in allowed_tools; add Bash or remove allowed_commands",
		`f.yaml:14:29: movements[0].allowed_commands[1]: expected a command name (1-64 of [A-Za-z0-9._+-], no spaces or slashes), found "rm -rf"`,
		"f.yaml:17:15: movements[0].rules[0].next: COMPLETE is a terminal sentinel, reachable only through the complete tool (status success); expected a movement name or WAIT_SUBTASKS",
		`f.yaml:19:15: movements[0].rules[1].next: expected a movement name (plan) or WAIT_SUBTASKS, found "planx"; did you mean "plan"?`,
		`f.yaml:20:9: movements[0].rules[2].nxt: unknown field "nxt"; did you mean "next"?`,
		"f.yaml:20:9: movements[0].rules[2].condition: required field is missing; expected a non-empty string telling the model when to take this rule",
		`f.yaml:21:19: movements[0].default_next: expected a movement name (plan) or one of COMPLETE, ABORT, ASK, WAIT_SUBTASKS, found "nowhere"`,
		"f.yaml:22:31: movements[0].max_consecutive_revisits: expected a positive integer, found integer -1",
		`f.yaml:23:11: movements[1].name: duplicate movement name "plan"; first defined at 9:11`,
		`f.yaml:29:5: movements[1].persona_name: unknown field "persona_name"; did you mean "persona"?`,
	}
	got := errLines(t, src)
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("errors mismatch (-want +got):\n%s", diff)
	}

	// The typed error carries the same facts field by field.
	_, err := Parse("f.yaml", []byte(src))
	var errs *Errors
	if !errors.As(err, &errs) {
		t.Fatalf("error is %T, want *Errors", err)
	}
	wantFirst := Error{File: "f.yaml", Line: 1, Col: 7, Field: "name",
		Message: `expected 1-64 lowercase letters, digits and hyphens ([a-z0-9-]), found "Code_Review"`}
	if diff := cmp.Diff(wantFirst, errs.List[0]); diff != "" {
		t.Errorf("first error mismatch (-want +got):\n%s", diff)
	}
	var one *Error
	if !errors.As(err, &one) || one.Line != 1 {
		t.Errorf("errors.As(err, *Error) = %v, want the first fault", one)
	}
}

func TestParseAccepts(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		src  string
		want Piece
	}{
		{
			name: "minimal",
			src:  one("    allowed_tools: []", "    rules: []"),
			want: Piece{Name: "p", Description: "d", MaxMovements: 3, InitialMovement: "a", Movements: []Movement{
				{Name: "a", Persona: "x", Instruction: "y", AllowedTools: []string{}, Rules: []Rule{}},
			}},
		},
		{
			name: "every field",
			src: `name: ops-9
description: |
  Remote operations.
max_movements: 0x10
initial_movement: check
triggers:
  keywords: [ssh, "2fa"]
required_mcp: [github, my_server-2]
model: claude-sonnet-4-5
movements:
  - name: check
    agent: claude-code
    edit: true
    persona: ops
    instruction: check hosts
    allowed_tools: [Read, Write, Bash, SshExec, mcp__*, mcp__github__*, mcp__fs__read_file]
    allowed_commands: [git, python3.12, g++]
    allowed_ssh_connections: ["*", 6f9619ff-8b86-d011-b42d-00c04fc964ff]
    rules:
      - condition: subtasks running
        next: WAIT_SUBTASKS
      - condition: again
        next: check
      - condition: report
        next: report_1
    default_next: ASK
    max_consecutive_revisits: 7
  - name: report_1
    edit: false
    persona: writer
    instruction: write
    allowed_tools: [SshDownload, Bash]
    allowed_ssh_connections: []
    allowed_commands: []
    rules: []
    default_next: COMPLETE
`,
			want: Piece{
				Name: "ops-9", Description: "Remote operations.\n", MaxMovements: 16, InitialMovement: "check",
				Triggers:    &Triggers{Keywords: []string{"ssh", "2fa"}},
				RequiredMCP: []string{"github", "my_server-2"},
				Model:       "claude-sonnet-4-5",
				Movements: []Movement{
					{
						Name: "check", Agent: "claude-code", Edit: true, Persona: "ops", Instruction: "check hosts",
						AllowedTools:          []string{"Read", "Write", "Bash", "SshExec", "mcp__*", "mcp__github__*", "mcp__fs__read_file"},
						AllowedCommands:       []string{"git", "python3.12", "g++"},
						AllowedSSHConnections: []string{"*", "6f9619ff-8b86-d011-b42d-00c04fc964ff"},
						Rules: []Rule{
							{Condition: "subtasks running", Next: WaitSubtasks},
							{Condition: "again", Next: "check"},
							{Condition: "report", Next: "report_1"},
						},
						DefaultNext: Ask, MaxConsecutiveRevisits: 7,
					},
					{
						Name: "report_1", Persona: "writer", Instruction: "write",
						AllowedTools: []string{"SshDownload", "Bash"}, AllowedSSHConnections: []string{}, AllowedCommands: []string{},
						Rules: []Rule{}, DefaultNext: Complete,
					},
				},
			},
		},
		{
			name: "anchors, aliases, flow style, explicit string tag",
			src: `{name: p, description: &d shared, max_movements: 2, initial_movement: a,
 triggers: {keywords: [!!str 42]},
 movements: [
  {name: a, edit: false, persona: *d, instruction: *d, allowed_tools: &t [Read], rules: [{condition: go, next: b}]},
  {name: b, edit: false, persona: *d, instruction: *d, allowed_tools: *t, rules: []}]}
`,
			want: Piece{Name: "p", Description: "shared", MaxMovements: 2, InitialMovement: "a",
				Triggers: &Triggers{Keywords: []string{"42"}},
				Movements: []Movement{
					{Name: "a", Persona: "shared", Instruction: "shared", AllowedTools: []string{"Read"}, Rules: []Rule{{Condition: "go", Next: "b"}}},
					{Name: "b", Persona: "shared", Instruction: "shared", AllowedTools: []string{"Read"}, Rules: []Rule{}},
				}},
		},
		{
			name: "empty triggers",
			src:  one("    allowed_tools: []", "    rules: []") + "triggers: {}\n",
			want: Piece{Name: "p", Description: "d", MaxMovements: 3, InitialMovement: "a", Triggers: &Triggers{}, Movements: []Movement{
				{Name: "a", Persona: "x", Instruction: "y", AllowedTools: []string{}, Rules: []Rule{}},
			}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := Parse("f.yaml", []byte(tt.src))
			if err != nil {
				t.Fatalf("Parse: %v", err)
			}
			if diff := cmp.Diff(&tt.want, got, cmpopts.IgnoreTypes(Pos{})); diff != "" {
				t.Errorf("piece mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestParseKeepsPositions(t *testing.T) {
	t.Parallel()
	src := one("    allowed_tools: []", "    rules:", "      - condition: c", "        next: a")
	p, err := Parse("f.yaml", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	got := []Pos{p.NamePos, p.Movements[0].Pos, p.Movements[0].Rules[0].Pos}
	want := []Pos{{1, 7}, {6, 5}, {12, 9}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("positions mismatch (-want +got):\n%s", diff)
	}
}

func TestErrorFormat(t *testing.T) {
	t.Parallel()
	tests := []struct {
		err  Error
		want string
	}{
		{Error{File: "a.yaml", Line: 2, Col: 3, Field: "movements[0].name", Message: "bad"}, "a.yaml:2:3: movements[0].name: bad"},
		{Error{File: "a.yaml", Line: 2, Col: 3, Message: "bad"}, "a.yaml:2:3: bad"},
		{Error{File: "a.yaml", Message: "bad"}, "a.yaml: bad"},
		{Error{Line: 1, Col: 1, Field: "name", Message: "bad"}, ":1:1: name: bad"},
		{Error{Message: "bad"}, "bad"},
	}
	for _, tt := range tests {
		if got := tt.err.Error(); got != tt.want {
			t.Errorf("Error() = %q, want %q", got, tt.want)
		}
	}
	errs := &Errors{List: []Error{tests[0].err, tests[1].err}}
	if got, want := errs.Error(), "a.yaml:2:3: movements[0].name: bad\na.yaml:2:3: bad"; got != want {
		t.Errorf("Errors.Error() = %q, want %q", got, want)
	}
}

func TestRevisitLimit(t *testing.T) {
	t.Parallel()
	if got := (&Movement{}).RevisitLimit(); got != DefaultMaxConsecutiveRevisits {
		t.Errorf("unset RevisitLimit = %d, want %d", got, DefaultMaxConsecutiveRevisits)
	}
	if got := (&Movement{MaxConsecutiveRevisits: 2}).RevisitLimit(); got != 2 {
		t.Errorf("RevisitLimit = %d, want 2", got)
	}
}

func TestSuggest(t *testing.T) {
	t.Parallel()
	known := []string{"name", "persona", "allowed_tools", "default_next", "rules"}
	tests := []struct{ in, want string }{
		{"nmae", "name"},       // transposition
		{"Persona", "persona"}, // case
		{"allowedTools", "allowed_tools"},
		{"tools", "allowed_tools"},  // suffix
		{"persona_name", "persona"}, // prefix
		{"rule", "rules"},
		{"xyz", ""},
		{"model", ""},
	}
	for _, tt := range tests {
		if got := suggest(tt.in, known); got != tt.want {
			t.Errorf("suggest(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

func TestKnownTools(t *testing.T) {
	t.Parallel()
	var implemented []string
	seen := map[string]bool{}
	for _, tool := range KnownTools() {
		if seen[tool.Name] {
			t.Errorf("KnownTools lists %s twice", tool.Name)
		}
		seen[tool.Name] = true
		if !isKnownTool(tool.Name) {
			t.Errorf("KnownTools lists %s but the validator rejects it", tool.Name)
		}
		if tool.Group == "" || tool.Summary == "" {
			t.Errorf("%s lacks a group or summary", tool.Name)
		}
		if tool.Implemented {
			implemented = append(implemented, tool.Name)
		}
	}
	if diff := cmp.Diff([]string{"transition", "complete", "Read", "Write", "Edit", "Glob", "Grep", "Bash", "WebSearch", "WebFetch", "DownloadFile", "ListPieces", "GetPiece", "CreatePiece", "UpdatePiece", "SshExec", "SshUpload", "SshDownload", "SpawnSubTask", "ReadToolDoc", "ReadSkill"}, implemented); diff != "" {
		t.Errorf("implemented tools mismatch (-want +got):\n%s", diff)
	}
	// The switch must not accept anything KnownTools does not list: try
	// every name the inventory of docs/spec/pieces-engine.md §6.2 and Maestro add.
	const inventory = 42
	if len(seen) != inventory {
		t.Errorf("KnownTools has %d tools, want %d (update this test and docs/pieces.md together)", len(seen), inventory)
	}
	for _, name := range []string{"read", "TodoWrite", "DeletePiece", "mcp__x__*", ""} {
		if isKnownTool(name) {
			t.Errorf("isKnownTool(%q) = true", name)
		}
	}
	// A fresh slice each call.
	a := KnownTools()
	a[0].Name = "changed"
	if KnownTools()[0].Name == "changed" {
		t.Error("KnownTools returned shared storage")
	}
}

func TestIsSentinel(t *testing.T) {
	t.Parallel()
	for _, s := range []string{Complete, Abort, Ask, WaitSubtasks} {
		if !IsSentinel(s) {
			t.Errorf("IsSentinel(%q) = false", s)
		}
	}
	for _, s := range []string{"complete", "plan", ""} {
		if IsSentinel(s) {
			t.Errorf("IsSentinel(%q) = true", s)
		}
	}
	if !Undeletable("general") || !Undeletable("chat") || Undeletable("code") {
		t.Error("Undeletable: want exactly general and chat")
	}
}
