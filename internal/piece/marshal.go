package piece

import (
	"bytes"
	"fmt"
	"strconv"

	"go.yaml.in/yaml/v4"
)

// Marshal encodes a piece as canonical YAML: fields in schema order,
// multi-line text as literal blocks, tool and command lists in flow style,
// optional fields only when set. It keeps the difference between an omitted
// and an empty allowed_ssh_connections or allowed_commands, so
// Parse(Marshal(p)) reproduces p (positions aside). Marshal does not
// validate; parse the result to check a piece built in code.
func Marshal(p *Piece) ([]byte, error) {
	root := mapNode()
	addStr(root, "name", p.Name)
	addStr(root, "description", p.Description)
	addInt(root, "max_movements", p.MaxMovements)
	addStr(root, "initial_movement", p.InitialMovement)
	if p.Triggers != nil {
		t := mapNode()
		if p.Triggers.Keywords != nil {
			add(t, "keywords", listNode(p.Triggers.Keywords, true))
		}
		add(root, "triggers", t)
	}
	if p.RequiredMCP != nil {
		add(root, "required_mcp", listNode(p.RequiredMCP, true))
	}
	if p.Model != "" {
		addStr(root, "model", p.Model)
	}
	moves := &yaml.Node{Kind: yaml.SequenceNode, Tag: "!!seq"}
	for i := range p.Movements {
		moves.Content = append(moves.Content, movementNode(&p.Movements[i]))
	}
	add(root, "movements", moves)

	var buf bytes.Buffer
	dumper, err := yaml.NewDumper(&buf, yaml.WithIndent(2), yaml.WithLineWidth(100))
	if err != nil {
		return nil, fmt.Errorf("creating YAML dumper for piece %q: %w", p.Name, err)
	}
	if err := dumper.Dump(root); err != nil {
		return nil, fmt.Errorf("encoding piece %q: %w", p.Name, err)
	}
	if err := dumper.Close(); err != nil {
		return nil, fmt.Errorf("encoding piece %q: %w", p.Name, err)
	}
	return buf.Bytes(), nil
}

func movementNode(m *Movement) *yaml.Node {
	n := mapNode()
	addStr(n, "name", m.Name)
	if m.Agent != "" {
		addStr(n, "agent", m.Agent)
	}
	add(n, "edit", &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!bool", Value: strconv.FormatBool(m.Edit)})
	addStr(n, "persona", m.Persona)
	addStr(n, "instruction", m.Instruction)
	add(n, "allowed_tools", listNode(m.AllowedTools, true))
	if m.AllowedCommands != nil {
		add(n, "allowed_commands", listNode(m.AllowedCommands, true))
	}
	if m.AllowedSSHConnections != nil {
		add(n, "allowed_ssh_connections", listNode(m.AllowedSSHConnections, false))
	}
	rules := &yaml.Node{Kind: yaml.SequenceNode, Tag: "!!seq"}
	if len(m.Rules) == 0 {
		rules.Style = yaml.FlowStyle
	}
	for _, r := range m.Rules {
		rn := mapNode()
		addStr(rn, "condition", r.Condition)
		addStr(rn, "next", r.Next)
		rules.Content = append(rules.Content, rn)
	}
	add(n, "rules", rules)
	if m.DefaultNext != "" {
		addStr(n, "default_next", m.DefaultNext)
	}
	if m.TextAnswer != "" {
		addStr(n, "text_answer", m.TextAnswer)
	}
	if m.Model != "" {
		addStr(n, "model", m.Model)
	}
	if m.MaxConsecutiveRevisits != 0 {
		addInt(n, "max_consecutive_revisits", m.MaxConsecutiveRevisits)
	}
	return n
}

func mapNode() *yaml.Node { return &yaml.Node{Kind: yaml.MappingNode, Tag: "!!map"} }

func add(m *yaml.Node, key string, v *yaml.Node) {
	m.Content = append(m.Content, &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: key}, v)
}

func addStr(m *yaml.Node, key, s string) {
	v := &yaml.Node{}
	v.SetString(s)
	add(m, key, v)
}

func addInt(m *yaml.Node, key string, i int) {
	add(m, key, &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!int", Value: strconv.Itoa(i)})
}

// listNode encodes a string list; flow style keeps short lists on one line.
func listNode(items []string, flow bool) *yaml.Node {
	n := &yaml.Node{Kind: yaml.SequenceNode, Tag: "!!seq"}
	if flow || len(items) == 0 {
		n.Style = yaml.FlowStyle
	}
	for _, s := range items {
		v := &yaml.Node{}
		v.SetString(s)
		n.Content = append(n.Content, v)
	}
	return n
}
