package engine

import (
	"github.com/maestro-run/maestro/internal/netguard"
	"github.com/maestro-run/maestro/internal/piece"
	"github.com/maestro-run/maestro/internal/tool"
)

// webTool returns the web tool name for movement, or why it is not
// offered. A destination the network guard refuses is recorded as a
// FirewallBlock event.
func (r *run) webTool(movement, name string) (tool.Tool, string) {
	if r.cfg.Web == nil {
		return nil, "web access is not configured"
	}
	o := *r.cfg.Web
	o.OnBlock = func(b *netguard.BlockedError) {
		r.emit(FirewallBlock{Movement: movement, Tool: name, URL: b.URL, Host: b.Host, Address: b.Addr, Class: b.Class, Stage: b.Stage})
	}
	switch {
	case name == "WebSearch" && o.Search == nil:
		return nil, "no web search backend is configured (web.search in the configuration)"
	case name == "WebSearch":
		return tool.NewWebSearch(o), ""
	case o.Guard == nil:
		return nil, "web access is not configured"
	case name == "WebFetch":
		return tool.NewWebFetch(o), ""
	}
	return tool.NewDownloadFile(r.cfg.Workspace, o), ""
}

// sshTool returns the SSH tool name for m, or why it is not offered. Each
// call is limited to m's allowed_ssh_connections.
func (r *run) sshTool(m *piece.Movement, name string) (tool.Tool, string) {
	if len(r.cfg.SSH) == 0 {
		return nil, "no SSH connection is configured (ssh_connections in the configuration)"
	}
	o := tool.SSHOptions{Connections: r.cfg.SSH, Allowed: m.AllowedSSHConnections}
	switch name {
	case "SshExec":
		return tool.NewSshExec(o), ""
	case "SshUpload":
		return tool.NewSshUpload(r.cfg.Workspace, o), ""
	}
	return tool.NewSshDownload(r.cfg.Workspace, o), ""
}
