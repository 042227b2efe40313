package hostedrunner

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/maestro-run/maestro/internal/httpedge"
	"github.com/maestro-run/maestro/internal/protocol"
	"github.com/maestro-run/maestro/internal/workspace"
)

// Protocol strings of the remote-runner surface (wire contract §14).
const (
	IdentityProtocol = "evalops.remote-runner.identity.v1"
	DrainProtocol    = "evalops.remote-runner.drain.v1"
	ManifestProtocol = "evalops.remote-runner.snapshot-manifest.v1"
	RetentionVersion = "evalops.remote-runner.retention.v1"
	// Work continuity and platform evidence blocks of the manifest
	// (docs/spec/seed-headless-protocol.md, "Hosted Remote-Runner Drain").
	WorkContinuityProtocol   = "evalops.remote-runner.work-continuity.v1"
	PlatformEvidenceProtocol = "evalops.remote-runner.platform-evidence.v1"
	CodexSubagentSchema      = "evalops.maestro.codex.subagent-workgraph.v1"
	EvidenceDrainRecorded    = "hosted_runner_drain_manifest_recorded"
	ExportMode               = "local_path_contract"
)

// Runtime flush statuses.
const (
	FlushCompleted = "completed"
	FlushFailed    = "failed"
	FlushSkipped   = "skipped"
	// flushLegacyInterrupted is read as failed.
	flushLegacyInterrupted = "interrupted"
)

// Drain statuses.
const (
	DrainDrained     = "drained"
	DrainInterrupted = "interrupted"
)

// Manifest is the snapshot manifest v1 (wire contract §14.3).
type Manifest struct {
	ProtocolVersion  string          `json:"protocol_version"`
	RunnerSessionID  string          `json:"runner_session_id"`
	WorkspaceID      string          `json:"workspace_id,omitempty"`
	AgentRunID       string          `json:"agent_run_id,omitempty"`
	MaestroSessionID string          `json:"maestro_session_id"`
	Reason           string          `json:"reason,omitempty"`
	RequestedBy      string          `json:"requested_by,omitempty"`
	CreatedAt        string          `json:"created_at"`
	WorkspaceRoot    string          `json:"workspace_root"`
	Runtime          ManifestRuntime `json:"runtime"`
	WorkspaceExport  WorkspaceExport `json:"workspace_export"`
	// WorkContinuity and PlatformEvidence are the later version's blocks
	// (absent from older manifests, which still restore).
	WorkContinuity   *WorkContinuity   `json:"work_continuity,omitempty"`
	PlatformEvidence *PlatformEvidence `json:"platform_evidence,omitempty"`
	RetentionPolicy  RetentionPolicy   `json:"retention_policy"`
	// Snapshot is the runtime snapshot (HeadlessRuntimeSnapshot) at drain.
	Snapshot json.RawMessage `json:"snapshot"`
}

// WorkContinuity says what work the drain found in flight (and stopped):
// the counts of the runtime state's active tools, tracked tools and
// pending requests when the drain began, and the Codex subagent work graph (Maestro runs no Codex
// subagents in a hosted runner: its lists are empty).
type WorkContinuity struct {
	ProtocolVersion            string   `json:"protocol_version"`
	CodexSubagentSchemaVersion string   `json:"codex_subagent_schema_version"`
	ActiveToolCount            int      `json:"active_tool_count"`
	TrackedToolCount           int      `json:"tracked_tool_count"`
	PendingRequestCount        int      `json:"pending_request_count"`
	CodexSubagentToolCallCount *int     `json:"codex_subagent_tool_call_count,omitempty"`
	CodexSubagentChildRunCount *int     `json:"codex_subagent_child_run_count,omitempty"`
	CodexSubagentThreadCount   *int     `json:"codex_subagent_thread_count,omitempty"`
	CodexSubagentEdgeCount     *int     `json:"codex_subagent_edge_count,omitempty"`
	CodexSubagentToolCallIDs   []string `json:"codex_subagent_tool_call_ids"`
	CodexSubagentChildRunIDs   []string `json:"codex_subagent_child_run_ids"`
	CodexSubagentThreadIDs     []string `json:"codex_subagent_thread_ids"`
}

// PlatformEvidence is the record the platform keeps of the drain.
type PlatformEvidence struct {
	ProtocolVersion         string            `json:"protocol_version"`
	EventType               string            `json:"event_type"`
	RunnerSessionID         string            `json:"runner_session_id"`
	WorkspaceID             string            `json:"workspace_id,omitempty"`
	AgentRunID              string            `json:"agent_run_id,omitempty"`
	MaestroSessionID        string            `json:"maestro_session_id"`
	Status                  string            `json:"status"`
	RuntimeFlushStatus      string            `json:"runtime_flush_status"`
	ManifestPath            string            `json:"manifest_path"`
	ManifestProtocolVersion string            `json:"manifest_protocol_version"`
	CreatedAt               string            `json:"created_at"`
	WorkContinuity          WorkContinuity    `json:"work_continuity"`
	Retention               EvidenceRetention `json:"retention"`
	EvidenceRefs            []string          `json:"evidence_refs"`
}

// EvidenceRetention is the retention summary of the platform evidence.
type EvidenceRetention struct {
	PolicyVersion                              string   `json:"policy_version"`
	ControlPlaneMetadataVisibility             string   `json:"control_plane_metadata_visibility"`
	RuntimeSnapshotVisibility                  string   `json:"runtime_snapshot_visibility"`
	RedactionRequiredBeforeExternalPersistence []string `json:"redaction_required_before_external_persistence"`
}

// workContinuity counts the work in flight in a runtime state.
func workContinuity(st protocol.RuntimeState) WorkContinuity {
	return WorkContinuity{
		ProtocolVersion: WorkContinuityProtocol, CodexSubagentSchemaVersion: CodexSubagentSchema,
		ActiveToolCount: len(st.ActiveTools), TrackedToolCount: len(st.TrackedTools),
		PendingRequestCount:      len(st.PendingRequests),
		CodexSubagentToolCallIDs: []string{}, CodexSubagentChildRunIDs: []string{}, CodexSubagentThreadIDs: []string{},
	}
}

// platformEvidence is the evidence record of the drain that wrote m at
// path with the drain status status; the manifest's work continuity
// with the counts of its lists added.
func platformEvidence(m *Manifest, path, status string) *PlatformEvidence {
	wc := *m.WorkContinuity
	edges := 0
	wc.CodexSubagentToolCallCount, wc.CodexSubagentChildRunCount = ptr(len(wc.CodexSubagentToolCallIDs)), ptr(len(wc.CodexSubagentChildRunIDs))
	wc.CodexSubagentThreadCount, wc.CodexSubagentEdgeCount = ptr(len(wc.CodexSubagentThreadIDs)), &edges
	ret := m.RetentionPolicy
	e := &PlatformEvidence{
		ProtocolVersion: PlatformEvidenceProtocol, EventType: EvidenceDrainRecorded,
		RunnerSessionID: m.RunnerSessionID, WorkspaceID: m.WorkspaceID, AgentRunID: m.AgentRunID,
		MaestroSessionID: m.MaestroSessionID, Status: status, RuntimeFlushStatus: m.Runtime.FlushStatus,
		ManifestPath: path, ManifestProtocolVersion: m.ProtocolVersion, CreatedAt: m.CreatedAt,
		WorkContinuity: wc,
		Retention: EvidenceRetention{
			PolicyVersion: ret.PolicyVersion, ControlPlaneMetadataVisibility: ret.Visibility.ControlPlaneMetadata,
			RuntimeSnapshotVisibility:                  ret.Visibility.RuntimeSnapshot,
			RedactionRequiredBeforeExternalPersistence: ret.Redaction.RequiredBeforeExternalPersistence,
		},
		EvidenceRefs: []string{
			"remote-runner://sessions/" + m.RunnerSessionID + "/drain#manifest",
			"maestro://headless/sessions/" + m.MaestroSessionID + "#drain",
		},
	}
	if m.AgentRunID != "" {
		e.EvidenceRefs = append(e.EvidenceRefs, "platform-agent-run:"+m.AgentRunID)
	}
	return e
}

func ptr[T any](v T) *T { return &v }

// ManifestRuntime is the manifest's runtime block.
type ManifestRuntime struct {
	FlushStatus     string `json:"flush_status"`
	Error           string `json:"error,omitempty"`
	SessionID       string `json:"session_id"`
	SessionFile     string `json:"session_file,omitempty"`
	ProtocolVersion string `json:"protocol_version,omitempty"`
	Cursor          *int64 `json:"cursor,omitempty"`
}

// WorkspaceExport lists the paths handed off with the workspace.
type WorkspaceExport struct {
	Mode  string       `json:"mode"`
	Paths []ExportPath `json:"paths"`
}

// ExportPath is one export_paths entry, resolved.
type ExportPath struct {
	Input        string `json:"input"`
	Path         string `json:"path"`
	RelativePath string `json:"relative_path"`
	// Type is file, directory, other or missing.
	Type string `json:"type"`
}

// RetentionPolicy is the fixed retention block.
type RetentionPolicy struct {
	PolicyVersion string              `json:"policy_version"`
	ManagedBy     string              `json:"managed_by"`
	Visibility    RetentionVisibility `json:"visibility"`
	Redaction     RetentionRedaction  `json:"redaction"`
}

// RetentionVisibility says who may see each artifact.
type RetentionVisibility struct {
	ControlPlaneMetadata string `json:"control_plane_metadata"`
	WorkspaceExport      string `json:"workspace_export"`
	RuntimeSnapshot      string `json:"runtime_snapshot"`
	RuntimeLogs          string `json:"runtime_logs"`
}

// RetentionRedaction lists what must be redacted.
type RetentionRedaction struct {
	RequiredBeforeExternalPersistence []string `json:"required_before_external_persistence"`
	ForbiddenPlaintext                []string `json:"forbidden_plaintext"`
}

// Retention returns the fixed retention policy.
func Retention() RetentionPolicy {
	return RetentionPolicy{
		PolicyVersion: RetentionVersion,
		ManagedBy:     "platform",
		Visibility: RetentionVisibility{
			ControlPlaneMetadata: "operator", WorkspaceExport: "tenant",
			RuntimeSnapshot: "internal", RuntimeLogs: "operator",
		},
		Redaction: RetentionRedaction{
			RequiredBeforeExternalPersistence: []string{"runtime_snapshot", "runtime_logs"},
			ForbiddenPlaintext: []string{"provider_credentials", "tool_secrets", "attach_tokens",
				"artifact_access_tokens", "raw_environment"},
		},
	}
}

// timestamp formats t as the manifest's created_at (UTC, milliseconds).
func timestamp(t time.Time) string { return t.UTC().Format("2006-01-02T15:04:05.000Z") }

// manifestName is <runner id sanitised>-<ISO time sanitised>.json.
func manifestName(runnerID string, t time.Time) string {
	clean := func(s string) string {
		return strings.Map(func(r rune) rune {
			if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_' {
				return r
			}
			return '_'
		}, s)
	}
	return clean(runnerID) + "-" + clean(timestamp(t)) + ".json"
}

// sessionFileName is the name of the session file a drain writes beside
// the manifest manifestName.
func sessionFileName(manifestName string) string {
	return strings.TrimSuffix(manifestName, ".json") + ".session.jsonl"
}

// openSnapshotRoot opens the snapshot root, creating it: inside the
// workspace (the contract's default) from the workspace root with no link
// followed at any component.
func openSnapshotRoot(cfg Config) (*workspace.Dir, error) {
	d, err := openDir(cfg.WorkspaceRoot, cfg.SnapshotRoot, true, 0o755)
	if err != nil {
		return nil, dirError("open the snapshot root", cfg.SnapshotRoot, err)
	}
	return d, nil
}

// writeManifest writes m as name in the snapshot root d, atomically (a
// link or FIFO at name is replaced, never followed or opened).
func writeManifest(d *workspace.Dir, name string, m *Manifest) error {
	data, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return fmt.Errorf("encode snapshot manifest: %w", err)
	}
	if err := d.WriteFileAtomic(name, append(data, '\n'), 0o600); err != nil {
		return fmt.Errorf("write snapshot manifest: %w", err)
	}
	return nil
}

// ErrExportEscape is wrapped by export path errors that leave the root.
var ErrExportEscape = errors.New("Export path escapes hosted runner workspace root")

// ResolveExport resolves one export_paths entry against the workspace root:
// relative entries are joined to the root, symbolic links are resolved
// (in the entry and in the root), and the result must stay inside the
// resolved root. An entry that does not exist is recorded as "missing"
// provided its existing ancestors stay inside the root.
func ResolveExport(root, input string) (ExportPath, error) {
	if input == "" {
		return ExportPath{}, errors.New("export path is empty")
	}
	if strings.ContainsRune(input, 0) {
		return ExportPath{}, errors.New("export path contains a NUL byte")
	}
	realRoot, err := filepath.EvalSymlinks(root)
	if err != nil {
		return ExportPath{}, fmt.Errorf("resolve workspace root: %w", err)
	}
	p := input
	if !filepath.IsAbs(p) {
		p = filepath.Join(root, p)
	}
	real, missing, err := realpath(p)
	if err != nil {
		return ExportPath{}, fmt.Errorf("export path %s: %w", input, err)
	}
	rel, ok := workspace.Within(realRoot, real)
	if !ok {
		return ExportPath{}, fmt.Errorf("%w: %s", ErrExportEscape, input)
	}
	e := ExportPath{Input: input, Path: real, RelativePath: rel, Type: "missing"}
	if !missing {
		st, err := os.Lstat(real)
		if err != nil {
			return ExportPath{}, fmt.Errorf("export path %s: %w", input, err)
		}
		switch {
		case st.IsDir():
			e.Type = "directory"
		case st.Mode().IsRegular():
			e.Type = "file"
		default:
			e.Type = "other"
		}
	}
	return e, nil
}

// realpath resolves symbolic links in the absolute path p as the kernel
// would, component by component ("." and ".." after the links before
// them). When a component does not exist, the rest is appended as given
// and missing is true; a dangling link is followed to where it points.
func realpath(p string) (string, bool, error) {
	return resolvePath(p, 0)
}

func resolvePath(p string, depth int) (string, bool, error) {
	if depth > 40 {
		return "", false, errors.New("too many levels of symbolic links")
	}
	comps := strings.Split(p, string(filepath.Separator))
	cur := string(filepath.Separator)
	for i, c := range comps {
		switch c {
		case "", ".":
			continue
		case "..":
			cur = filepath.Dir(cur)
			continue
		}
		next := filepath.Join(cur, c)
		fi, err := os.Lstat(next)
		if errors.Is(err, fs.ErrNotExist) {
			return filepath.Join(append([]string{cur}, comps[i:]...)...), true, nil
		}
		if err != nil {
			return "", false, err
		}
		if fi.Mode()&fs.ModeSymlink == 0 {
			cur = next
			continue
		}
		target, err := os.Readlink(next)
		if err != nil {
			return "", false, err
		}
		if !filepath.IsAbs(target) {
			target = cur + string(filepath.Separator) + target
		}
		real, missing, err := resolvePath(target, depth+1)
		if err != nil {
			return "", false, err
		}
		if missing {
			return filepath.Join(append([]string{real}, comps[i+1:]...)...), true, nil
		}
		cur = real
	}
	return cur, false, nil
}

// ReadManifest reads and validates a manifest for restore (contract
// §14.4): the protocol string, the export mode, and every export
// relative_path inside root. The legacy flush status "interrupted" is read
// as failed.
func ReadManifest(path, root string) (*Manifest, error) {
	data, err := readManifestFile(path, root)
	if pe, ok := errors.AsType[*fs.PathError](err); ok && pe.Path == filepath.Base(path) {
		err = pe.Err // "open NAME: …" without its directory said less than path
	}
	if err != nil {
		return nil, fmt.Errorf("restore manifest %s: %w", path, err)
	}
	var m Manifest
	if err := json.Unmarshal(data, &m); err != nil {
		if msg, ok := httpedge.JSONTypeText(err); ok {
			// It named Go types ("cannot unmarshal string into Go struct
			// field ManifestRuntime.runtime.cursor of type int64").
			err = errors.New(msg)
		}
		return nil, fmt.Errorf("restore manifest %s: not a snapshot manifest: %w", path, err)
	}
	if m.ProtocolVersion != ManifestProtocol {
		return nil, fmt.Errorf("restore manifest %s: protocol_version %q, expected %q", path, m.ProtocolVersion, ManifestProtocol)
	}
	if m.WorkspaceExport.Mode != ExportMode {
		return nil, fmt.Errorf("restore manifest %s: workspace_export.mode %q, expected %q", path, m.WorkspaceExport.Mode, ExportMode)
	}
	for i, e := range m.WorkspaceExport.Paths {
		rel := e.RelativePath
		if rel == "" || filepath.IsAbs(rel) {
			return nil, fmt.Errorf("restore manifest %s: workspace_export.paths[%d].relative_path %q: expected a path relative to the workspace root", path, i, rel)
		}
		if _, err := ResolveExport(root, rel); err != nil {
			return nil, fmt.Errorf("restore manifest %s: workspace_export.paths[%d].relative_path: %w", path, i, err)
		}
	}
	switch m.Runtime.FlushStatus {
	case FlushCompleted, FlushFailed, FlushSkipped:
	case flushLegacyInterrupted:
		m.Runtime.FlushStatus = FlushFailed
	default:
		return nil, fmt.Errorf("restore manifest %s: runtime.flush_status %q, expected completed, failed or skipped", path, m.Runtime.FlushStatus)
	}
	return &m, nil
}

// readManifestFile reads the manifest file at path: its directory is
// reached from the workspace root without following a link when inside
// it; the file must be regular (a FIFO is refused without blocking) and at
// most MaxManifestBytes.
func readManifestFile(path, root string) ([]byte, error) {
	d, err := openDir(root, filepath.Dir(path), false, 0)
	if err != nil {
		return nil, dirError("open the manifest's directory", filepath.Dir(path), err)
	}
	defer d.Close()
	return readRegular(d, filepath.Base(path), MaxManifestBytes)
}

// restoredCursor is runtime.cursor, else snapshot.cursor, else 0.
func (m *Manifest) restoredCursor() int64 {
	if m.Runtime.Cursor != nil {
		return *m.Runtime.Cursor
	}
	var s struct {
		Cursor int64 `json:"cursor"`
	}
	if len(m.Snapshot) > 0 && json.Unmarshal(m.Snapshot, &s) == nil {
		return s.Cursor
	}
	return 0
}
