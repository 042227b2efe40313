package tool

import (
	"context"
	"errors"
	"fmt"
	"mime"
	"net/http"
	"net/url"
	"strings"
	"unicode/utf8"

	htmltomarkdown "github.com/JohannesKaufmann/html-to-markdown/v2"
	"github.com/JohannesKaufmann/html-to-markdown/v2/converter"
	"golang.org/x/net/html/charset"

	"github.com/maestro-run/maestro/internal/netguard"
	"github.com/maestro-run/maestro/internal/workspace"
)

// DefaultWebFetchChars is the default of WebOptions.MaxChars.
const DefaultWebFetchChars = 60_000

// DefaultDownloadBytes is the default of WebOptions.MaxDownloadBytes.
const DefaultDownloadBytes = 25 << 20

// WebOptions configures the web tools (WebFetch, DownloadFile, WebSearch).
type WebOptions struct {
	// Guard checks every destination and bounds every response; required
	// for WebFetch and DownloadFile.
	Guard *netguard.Guard
	// Search answers WebSearch; nil leaves WebSearch out.
	Search Searcher
	// OnBlock is told of every destination the guard refuses (the engine
	// records it as a firewall_block run event); nil ignores them.
	OnBlock func(*netguard.BlockedError)
	// MaxChars caps the text WebFetch returns (0: DefaultWebFetchChars).
	MaxChars int
	// MaxDownloadBytes caps a DownloadFile (0: DefaultDownloadBytes).
	MaxDownloadBytes int64
}

// WebFetchInput is the input of the WebFetch tool.
type WebFetchInput struct {
	URL      string `json:"url" jsonschema:"the http or https URL to fetch"`
	MaxChars int    `json:"max_chars,omitempty" jsonschema:"return at most this many characters (default and ceiling set by Maestro)"`
}

const webFetchDescription = `Fetch a web page and return its text: HTML as markdown, plain text and JSON as they are. ` +
	`Private and local addresses are refused. ReadToolDoc("WebFetch") has the details.`

// NewWebFetch returns the WebFetch tool.
func NewWebFetch(o WebOptions) Tool {
	return New("WebFetch", webFetchDescription, true, func(ctx context.Context, in WebFetchInput, _ Call) (Result, error) {
		return o.fetch(ctx, in), ctx.Err()
	})
}

// webResponse is a fetched body.
type webResponse struct {
	url         string // the final URL, after redirects
	status      int
	contentType string // the media type, lower case, without parameters
	header      string // the Content-Type header as sent
	body        []byte
	truncated   bool // the body was longer than the cap
}

// get fetches rawURL through the guard with a body cap of max bytes; a
// failure is returned as the Result the model sees.
func (o WebOptions) get(ctx context.Context, tool, rawURL string, max int64) (*webResponse, *Result) {
	fail := func(r Result) (*webResponse, *Result) { return nil, &r }
	u, err := url.Parse(strings.TrimSpace(rawURL))
	if err != nil || !u.IsAbs() {
		return fail(Failf(CodeInvalidInput, "%s: %q is not an absolute http or https URL", tool, workspace.Excerpt(rawURL)))
	}
	if _, err := o.Guard.CheckURL(ctx, u); err != nil {
		return fail(o.webError(tool, u, err))
	}
	ctx, cancel := context.WithTimeout(ctx, o.Guard.Timeout())
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return fail(Failf(CodeInvalidInput, "%s: %s", tool, workspace.Excerpt(err.Error())))
	}
	req.Header.Set("User-Agent", "Maestro-WebFetch/1 (+https://github.com/maestro-run/maestro)")
	req.Header.Set("Accept", "text/html,application/xhtml+xml,text/plain,application/json;q=0.9,*/*;q=0.5")
	resp, err := o.Guard.Client().Do(req)
	if err != nil {
		return fail(o.webError(tool, u, err))
	}
	defer resp.Body.Close()
	body, truncated, err := netguard.ReadCapped(resp.Body, max)
	if err != nil {
		return fail(o.webError(tool, u, err))
	}
	ct, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	return &webResponse{
		url: resp.Request.URL.Redacted(), status: resp.StatusCode, contentType: strings.ToLower(ct),
		header: resp.Header.Get("Content-Type"), body: body, truncated: truncated,
	}, nil
}

// webError is the Result of a failed request: a refused destination is
// reported to OnBlock and coded firewall_block.
func (o WebOptions) webError(tool string, u *url.URL, err error) Result {
	var blocked *netguard.BlockedError
	switch {
	case errors.As(err, &blocked):
		if o.OnBlock != nil {
			o.OnBlock(blocked)
		}
		return Failf(CodeFirewallBlock, "%s: %s", tool, workspace.Excerpt(blocked.Error()))
	case errors.Is(err, context.DeadlineExceeded) || strings.Contains(err.Error(), "Client.Timeout"):
		return Failf(CodeTimeout, "%s: %s took longer than %s", tool, u.Redacted(), o.Guard.Timeout())
	case errors.Is(err, context.Canceled):
		return Failf(CodeCancelled, "%s: cancelled", tool)
	}
	return Errorf("%s: %s", tool, workspace.Excerpt(err.Error()))
}

func (o WebOptions) fetch(ctx context.Context, in WebFetchInput) Result {
	resp, fail := o.get(ctx, "WebFetch", in.URL, o.Guard.MaxBytes())
	if fail != nil {
		return *fail
	}
	if resp.status < 200 || resp.status > 299 {
		return Errorf("WebFetch: %s answered HTTP %d %s: %s", resp.url, resp.status, http.StatusText(resp.status), workspace.Excerpt(string(resp.body)))
	}
	var text string
	htmlCut := false
	contentType := resp.contentType
	switch {
	case resp.contentType == "text/html" || resp.contentType == "application/xhtml+xml" || resp.contentType == "" && looksLikeHTML(resp.body):
		body, from := toUTF8(resp.body, resp.header, true)
		if from != "" {
			contentType += "; charset=" + from + " (converted to UTF-8)"
		}
		page, cut := htmlForConversion(body, MaxHTMLConvert)
		md, err := htmltomarkdown.ConvertString(string(page), converter.WithDomain(resp.url))
		if err != nil {
			return Errorf("WebFetch: convert %s to markdown: %s", resp.url, workspace.Excerpt(err.Error()))
		}
		text = md
		htmlCut = cut
	case isTextType(resp.contentType) || resp.contentType == "" && utf8.Valid(resp.body):
		body, from := toUTF8(resp.body, resp.header, false)
		if from != "" {
			contentType += "; charset=" + from + " (converted to UTF-8)"
		}
		text = string(body)
	default:
		return Failf(CodeInvalidInput, "WebFetch: %s is %s, not text; save it with DownloadFile instead", resp.url, resp.contentType)
	}
	limit := o.MaxChars
	if limit <= 0 {
		limit = DefaultWebFetchChars
	}
	if in.MaxChars > 0 && in.MaxChars < limit {
		limit = in.MaxChars
	}
	var b strings.Builder
	fmt.Fprintf(&b, "URL: %s\nContent-Type: %s\n\n", resp.url, contentType)
	if n := utf8.RuneCountInString(text); n > limit {
		cut := 0
		for i := range text {
			if limit == 0 {
				cut = i
				break
			}
			limit--
		}
		b.WriteString(text[:cut])
		fmt.Fprintf(&b, "\n\n[Maestro: truncated to the first %d of %d characters.]", utf8.RuneCountInString(text[:cut]), n)
	} else {
		b.WriteString(text)
	}
	if htmlCut {
		fmt.Fprintf(&b, "\n\n[Maestro: the page has more than %d bytes of HTML (scripts and styles left out); only its beginning was converted.]", MaxHTMLConvert)
	}
	if resp.truncated {
		fmt.Fprintf(&b, "\n\n[Maestro: the page is larger than %d bytes; only its beginning was read.]", o.Guard.MaxBytes())
	}
	return Result{Content: b.String()}
}

// toUTF8 decodes body to UTF-8 from the charset its Content-Type header
// names or, for HTML, its <meta> names; from is that charset when body
// was converted, "" when it is kept (UTF-8, or no charset said and the
// body valid UTF-8). A page in Latin-1, Windows-1252 or Shift_JIS came
// back as U+FFFD where each accented letter or kana was.
func toUTF8(body []byte, header string, html bool) (_ []byte, from string) {
	var decode func([]byte) ([]byte, error)
	var name string
	if html {
		e, n, certain := charset.DetermineEncoding(body, header)
		if !certain && utf8.Valid(body) {
			return body, ""
		}
		decode, name = e.NewDecoder().Bytes, n
	} else {
		_, params, _ := mime.ParseMediaType(header)
		label := params["charset"]
		if label == "" {
			return body, ""
		}
		e, n := charset.Lookup(label)
		if e == nil {
			return body, ""
		}
		decode, name = e.NewDecoder().Bytes, n
	}
	if name == "utf-8" {
		return body, ""
	}
	out, err := decode(body)
	if err != nil {
		return body, ""
	}
	return out, name
}

// isTextType reports whether a media type is text WebFetch passes through.
func isTextType(ct string) bool {
	return strings.HasPrefix(ct, "text/") || ct == "application/json" || strings.HasSuffix(ct, "+json") ||
		ct == "application/xml" || strings.HasSuffix(ct, "+xml") || ct == "application/javascript"
}

// looksLikeHTML reports whether an untyped body starts like HTML.
func looksLikeHTML(b []byte) bool {
	head := strings.ToLower(strings.TrimSpace(string(b[:min(len(b), 512)])))
	return strings.HasPrefix(head, "<!doctype html") || strings.HasPrefix(head, "<html")
}

// WebSet is the web tools of a session without a piece (config
// web.sessions): WebFetch, DownloadFile into root, and WebSearch when o
// has a search backend.
func WebSet(root *workspace.Root, o WebOptions) []Tool {
	out := []Tool{NewWebFetch(o), NewDownloadFile(root, o)}
	if o.Search != nil {
		out = append(out, NewWebSearch(o))
	}
	return out
}

// BlockedLine is the status line of a destination the guard refused, for
// a session without run events.
func BlockedLine(b *netguard.BlockedError) string {
	what := b.Class
	if b.Addr != "" {
		what += " " + b.Addr
	}
	return fmt.Sprintf("firewall_block: %s refused (%s, %s)", b.URL, what, b.Stage)
}
