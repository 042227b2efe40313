package tool

import (
	"cmp"
	"context"
	"fmt"
	"net/http"
	"strings"

	"github.com/maestro-run/maestro/internal/workspace"
)

// DownloadFileInput is the input of the DownloadFile tool.
type DownloadFileInput struct {
	URL  string `json:"url" jsonschema:"the http or https URL to download"`
	Path string `json:"path" jsonschema:"where to save it: a path under input/ or output/, relative to the workspace root"`
}

const downloadDescription = `Download a URL into a file under input/ or output/ (a PDF, a data file, an image). ` +
	`Private and local addresses are refused. ReadToolDoc("DownloadFile") has the details.`

// NewDownloadFile returns the DownloadFile tool: it saves a URL's body
// into root, under input/ or output/, through the workspace's confinement
// (a path or link leading out of the workspace is refused).
func NewDownloadFile(root *workspace.Root, o WebOptions) Tool {
	return New("DownloadFile", downloadDescription, false, func(ctx context.Context, in DownloadFileInput, _ Call) (Result, error) {
		return o.download(ctx, root, in), ctx.Err()
	})
}

func (o WebOptions) download(ctx context.Context, root *workspace.Root, in DownloadFileInput) Result {
	clean, broken := workspace.CheckSlashPath(in.Path)
	if broken != "" {
		return Failf(CodeInvalidInput, "DownloadFile: path %q must be a relative path under input/ or output/, %s", workspace.Excerpt(in.Path), broken)
	}
	if top, _, _ := strings.Cut(clean, "/"); (top != "input" && top != "output") || !strings.Contains(clean, "/") {
		return Failf(CodeInvalidInput, "DownloadFile: path %q must name a file under input/ or output/", workspace.Excerpt(in.Path))
	}
	max := o.MaxDownloadBytes
	if max <= 0 {
		max = DefaultDownloadBytes
	}
	resp, fail := o.get(ctx, "DownloadFile", in.URL, max)
	if fail != nil {
		return *fail
	}
	if resp.status < 200 || resp.status > 299 {
		return Errorf("DownloadFile: %s answered HTTP %d %s; nothing was saved", resp.url, resp.status, http.StatusText(resp.status))
	}
	if resp.truncated {
		return Failf(CodeTooLarge, "DownloadFile: %s is larger than the %s limit; nothing was saved", resp.url, sizeText(max))
	}
	if err := root.WriteFile(clean, resp.body, 0o644); err != nil {
		return fileErrorResult(in.Path, err)
	}
	return Result{Content: fmt.Sprintf("saved %s (%d bytes, %s) to %s", resp.url, len(resp.body), cmp.Or(resp.contentType, "no content type"), clean)}
}
