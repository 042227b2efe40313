package tool

import (
	"encoding/json"
	"github.com/maestro-run/maestro/internal/workspace/wstest"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/maestro-run/maestro/internal/netguard"
)

// webServer serves the pages the web tool tests fetch, on loopback.
func webServer(t *testing.T) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/page":
			w.Header().Set("Content-Type", "text/html; charset=utf-8")
			io.WriteString(w, `<!doctype html><html><head><title>T</title><script>var secret=1</script></head>`+
				`<body><h1>Gophers</h1><p>Gophers <strong>dig</strong> tunnels. See <a href="/more">more</a>.</p></body></html>`)
		case "/plain":
			w.Header().Set("Content-Type", "text/plain")
			io.WriteString(w, "just text")
		case "/data.json":
			w.Header().Set("Content-Type", "application/json")
			io.WriteString(w, `{"a":1}`)
		case "/long":
			w.Header().Set("Content-Type", "text/plain")
			io.WriteString(w, strings.Repeat("é", 500))
		case "/latin1": // "Café crème" in ISO-8859-1, said by the header
			w.Header().Set("Content-Type", "text/html; charset=iso-8859-1")
			w.Write([]byte("<p>Caf\xe9 cr\xe8me</p>"))
		case "/meta-1252": // “quoted” in Windows-1252, said by a <meta> only
			w.Header().Set("Content-Type", "text/html")
			w.Write([]byte("<html><head><meta charset=\"windows-1252\"></head><body><p>\x93quoted\x94</p></body></html>"))
		case "/sjis": // 日本語 in Shift_JIS
			w.Header().Set("Content-Type", "text/plain; charset=Shift_JIS")
			w.Write([]byte("\x93\xfa\x96\x7b\x8c\xea"))
		case "/bin":
			w.Header().Set("Content-Type", "application/pdf")
			w.Write([]byte("%PDF-1.4 binary"))
		case "/to-metadata":
			http.Redirect(w, r, "http://169.254.169.254/latest/meta-data/", http.StatusFound)
		case "/missing":
			http.Error(w, "no such page", http.StatusNotFound)
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(srv.Close)
	return srv
}

func webOptions(t *testing.T, blocks *[]*netguard.BlockedError) WebOptions {
	t.Helper()
	g, err := netguard.New(netguard.Policy{Allow: []string{"127.0.0.1"}, MaxBytes: 4096})
	if err != nil {
		t.Fatal(err)
	}
	return WebOptions{Guard: g, MaxChars: 300, MaxDownloadBytes: 64, OnBlock: func(b *netguard.BlockedError) { *blocks = append(*blocks, b) }}
}

func TestWebFetch(t *testing.T) {
	srv := webServer(t)
	var blocks []*netguard.BlockedError
	fetch := NewWebFetch(webOptions(t, &blocks))
	tests := []struct {
		name     string
		in       WebFetchInput
		isError  bool
		code     string
		contains []string
		excludes []string
	}{
		{"html as markdown", WebFetchInput{URL: srv.URL + "/page"}, false, "",
			[]string{"# Gophers", "Gophers **dig** tunnels", "[more](" + srv.URL + "/more)"}, []string{"secret", "<p>"}},
		{"plain text", WebFetchInput{URL: srv.URL + "/plain"}, false, "", []string{"Content-Type: text/plain", "just text"}, nil},
		{"json", WebFetchInput{URL: srv.URL + "/data.json"}, false, "", []string{`{"a":1}`}, nil},
		{"truncated", WebFetchInput{URL: srv.URL + "/long", MaxChars: 10}, false, "",
			[]string{strings.Repeat("é", 10) + "\n\n[Maestro: truncated to the first 10 of 500 characters.]"}, nil},
		{"binary", WebFetchInput{URL: srv.URL + "/bin"}, true, CodeInvalidInput, []string{"application/pdf", "DownloadFile"}, nil},
		// A page in another charset than UTF-8 is converted: each
		// accented letter or kana came back as U+FFFD.
		{"latin-1 html", WebFetchInput{URL: srv.URL + "/latin1"}, false, "", []string{"Café crème", "charset=windows-1252 (converted to UTF-8)"}, []string{"\ufffd"}},
		{"charset in meta", WebFetchInput{URL: srv.URL + "/meta-1252"}, false, "", []string{"“quoted”"}, []string{"\ufffd"}},
		{"shift_jis text", WebFetchInput{URL: srv.URL + "/sjis"}, false, "", []string{"日本語", "charset=shift_jis"}, []string{"\ufffd"}},
		{"http error", WebFetchInput{URL: srv.URL + "/missing"}, true, CodeFailed, []string{"HTTP 404", "no such page"}, nil},
		{"not a url", WebFetchInput{URL: "gophers"}, true, CodeInvalidInput, []string{"not an absolute"}, nil},
		{"private address", WebFetchInput{URL: "http://10.0.0.1/"}, true, CodeFirewallBlock, []string{"private address", "web.allow_hosts"}, nil},
		{"redirect to metadata", WebFetchInput{URL: srv.URL + "/to-metadata"}, true, CodeFirewallBlock, []string{"169.254.169.254", "cloud metadata"}, nil},
		{"file scheme", WebFetchInput{URL: "file:///etc/passwd"}, true, CodeFirewallBlock, []string{"only http and https"}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res := call(t, fetch, tt.in)
			wantResult(t, res, tt.isError, tt.contains...)
			if got := res.ErrorCode(); got != tt.code {
				t.Errorf("error code %q, want %q", got, tt.code)
			}
			for _, s := range tt.excludes {
				if strings.Contains(res.Content, s) {
					t.Errorf("content holds %q:\n%s", s, res.Content)
				}
			}
		})
	}
	if len(blocks) != 3 || blocks[1].Stage != netguard.StageRedirect || blocks[1].Class != netguard.ClassMetadata {
		t.Errorf("OnBlock got %d blocks (%+v), want 3, the second a redirect to cloud metadata", len(blocks), blocks)
	}
}

func TestDownloadFile(t *testing.T) {
	srv := webServer(t)
	root, outside := testWorkspace(t, map[string]string{"input/.keep": ""})
	wstest.Symlink(t, outside, filepath.Join(root.Dir(), "output"))
	var blocks []*netguard.BlockedError
	dl := NewDownloadFile(root, webOptions(t, &blocks))
	tests := []struct {
		name    string
		in      DownloadFileInput
		code    string
		written string // file expected in the workspace
	}{
		{"saved", DownloadFileInput{URL: srv.URL + "/bin", Path: "input/doc.pdf"}, "", "input/doc.pdf"},
		{"nested", DownloadFileInput{URL: srv.URL + "/plain", Path: "input/a/b.txt"}, "", "input/a/b.txt"},
		{"too large", DownloadFileInput{URL: srv.URL + "/long", Path: "input/long.txt"}, CodeTooLarge, ""},
		{"outside input and output", DownloadFileInput{URL: srv.URL + "/plain", Path: "notes.txt"}, CodeInvalidInput, ""},
		{"dot dot", DownloadFileInput{URL: srv.URL + "/plain", Path: "input/../../x"}, CodeInvalidInput, ""},
		{"link out of the workspace", DownloadFileInput{URL: srv.URL + "/plain", Path: "output/x.txt"}, CodeWorkspaceViolation, ""},
		{"refused destination", DownloadFileInput{URL: "http://[::1]:9/", Path: "input/x"}, CodeFirewallBlock, ""},
		{"http error", DownloadFileInput{URL: srv.URL + "/missing", Path: "input/missing"}, CodeFailed, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res := call(t, dl, tt.in)
			if got := res.ErrorCode(); got != tt.code {
				t.Fatalf("error code %q, want %q: %s", got, tt.code, res.Content)
			}
			if tt.written != "" {
				if _, err := os.Stat(filepath.Join(root.Dir(), tt.written)); err != nil {
					t.Errorf("not saved: %v", err)
				}
			}
		})
	}
	if _, err := os.Stat(filepath.Join(outside, "x.txt")); err == nil {
		t.Error("DownloadFile wrote through a link out of the workspace")
	}
	for _, p := range []string{"input/long.txt", "input/missing"} {
		if _, err := os.Stat(filepath.Join(root.Dir(), p)); err == nil {
			t.Errorf("%s was saved", p)
		}
	}
	if len(blocks) != 1 || blocks[0].Class != netguard.ClassLoopback {
		t.Errorf("OnBlock got %+v, want one loopback block", blocks)
	}
}

// fakeSearch serves the three backends' APIs on loopback and checks their
// credentials.
func fakeSearch(t *testing.T) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		hit := func(q string) map[string]string {
			return map[string]string{"title": "About " + q, "url": "https://example.org/" + q}
		}
		switch {
		case r.URL.Path == "/nojson/search": // SearXNG without the JSON format
			http.Error(w, "<html>403 Forbidden</html>", http.StatusForbidden)
		case r.URL.Path == "/search" && r.Method == http.MethodGet: // SearXNG
			if r.URL.Query().Get("format") != "json" {
				http.Error(w, "format", http.StatusForbidden)
				return
			}
			q := r.URL.Query().Get("q")
			h := hit(q)
			h["content"] = "searxng\nsnippet"
			json.NewEncoder(w).Encode(map[string]any{"results": []any{h, hit("two"), hit("three")}})
		case r.URL.Path == "/res/v1/web/search": // Brave
			if r.Header.Get("X-Subscription-Token") != "brave-key" {
				http.Error(w, `{"error":"unauthorized"}`, http.StatusUnauthorized)
				return
			}
			h := hit(r.URL.Query().Get("q"))
			h["description"] = "brave snippet"
			json.NewEncoder(w).Encode(map[string]any{"web": map[string]any{"results": []any{h}}})
		case r.URL.Path == "/search" && r.Method == http.MethodPost: // Tavily
			if r.Header.Get("Authorization") != "Bearer tavily-key" {
				http.Error(w, `{"detail":"unauthorized"}`, http.StatusUnauthorized)
				return
			}
			var body struct {
				Query      string `json:"query"`
				MaxResults int    `json:"max_results"`
			}
			json.NewDecoder(r.Body).Decode(&body)
			h := hit(body.Query)
			h["content"] = "tavily snippet"
			json.NewEncoder(w).Encode(map[string]any{"results": []any{h}})
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(srv.Close)
	return srv
}

func TestWebSearch(t *testing.T) {
	srv := fakeSearch(t)
	tests := []struct {
		name     string
		cfg      SearchConfig
		in       WebSearchInput
		isError  bool
		contains []string
	}{
		{"searxng", SearchConfig{Backend: SearchSearXNG, URL: srv.URL + "/"}, WebSearchInput{Query: "gophers", MaxResults: 2},
			false, []string{"2 results for \"gophers\" (searxng)", "1. About gophers\n   https://example.org/gophers\n   searxng snippet", "2. About two"}},
		{"brave", SearchConfig{Backend: SearchBrave, URL: srv.URL, APIKey: "brave-key"}, WebSearchInput{Query: "moles"},
			false, []string{"(brave)", "https://example.org/moles", "brave snippet"}},
		{"tavily", SearchConfig{Backend: SearchTavily, URL: srv.URL, APIKey: "tavily-key"}, WebSearchInput{Query: "voles"},
			false, []string{"(tavily)", "https://example.org/voles", "tavily snippet"}},
		{"bad key", SearchConfig{Backend: SearchBrave, URL: srv.URL, APIKey: "wrong"}, WebSearchInput{Query: "x"},
			true, []string{"brave search: HTTP 401"}},
		// A SearXNG instance whose JSON format is not enabled (the
		// default) answers 403: the error says what to enable.
		{"searxng without json", SearchConfig{Backend: SearchSearXNG, URL: srv.URL + "/nojson"}, WebSearchInput{Query: "x"},
			true, []string{"searxng search: HTTP 403", "It does only when its settings.yml lists json in search.formats"}},
		{"empty query", SearchConfig{Backend: SearchSearXNG, URL: srv.URL}, WebSearchInput{Query: " "},
			true, []string{"query is required"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := NewSearcher(tt.cfg)
			if err != nil {
				t.Fatal(err)
			}
			res := call(t, NewWebSearch(WebOptions{Search: s}), tt.in)
			wantResult(t, res, tt.isError, tt.contains...)
			if strings.Contains(res.Content, "three") {
				t.Errorf("max_results not honoured:\n%s", res.Content)
			}
		})
	}
}

func TestNewSearcherErrors(t *testing.T) {
	for _, c := range []SearchConfig{{Backend: "bing"}, {Backend: SearchSearXNG}, {Backend: SearchTavily}, {Backend: SearchBrave}} {
		if _, err := NewSearcher(c); err == nil {
			t.Errorf("NewSearcher(%+v) accepted", c)
		}
	}
}

// The status line of a refusal names the class and, when an address was
// refused, the address; a refused scheme has none (it read "(scheme ,
// url)").
func TestBlockedLine(t *testing.T) {
	for _, tt := range []struct {
		b    netguard.BlockedError
		want string
	}{
		{netguard.BlockedError{URL: "file:///etc/passwd", Class: "scheme", Stage: "url"}, "firewall_block: file:///etc/passwd refused (scheme, url)"},
		{netguard.BlockedError{URL: "http://10.0.0.1/", Addr: "10.0.0.1", Class: "private", Stage: "resolve"}, "firewall_block: http://10.0.0.1/ refused (private 10.0.0.1, resolve)"},
	} {
		if got := BlockedLine(&tt.b); got != tt.want {
			t.Errorf("BlockedLine = %q, want %q", got, tt.want)
		}
	}
}
