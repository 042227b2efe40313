package tool

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/maestro-run/maestro/internal/workspace"
)

// SearchResult is one web search hit.
type SearchResult struct {
	Title   string
	URL     string
	Snippet string
}

// Searcher is a web search backend (SearXNG, Brave Search, Tavily).
type Searcher interface {
	// Name names the backend for messages.
	Name() string
	// Search returns up to n results for query.
	Search(ctx context.Context, query string, n int) ([]SearchResult, error)
}

// The search backends SearchConfig.Backend names.
const (
	SearchSearXNG = "searxng"
	SearchBrave   = "brave"
	SearchTavily  = "tavily"
)

// SearchConfig chooses and configures a search backend (config
// web.search).
type SearchConfig struct {
	// Backend is searxng, brave or tavily.
	Backend string
	// URL is the backend's base URL: required for searxng (the instance);
	// for brave and tavily it overrides the public API's (tests).
	URL string
	// APIKey authenticates to brave and tavily.
	APIKey string
	// Timeout bounds a search (0: 20 s).
	Timeout time.Duration
}

// NewSearcher returns the backend c names. The backend is an operator's
// choice, so its URL is not subject to the network guard (a SearXNG
// instance on the local network is usual).
func NewSearcher(c SearchConfig) (Searcher, error) {
	timeout := c.Timeout
	if timeout <= 0 {
		timeout = 20 * time.Second
	}
	client := &http.Client{Timeout: timeout, Transport: &http.Transport{Proxy: http.ProxyFromEnvironment}}
	base := strings.TrimSuffix(c.URL, "/")
	switch c.Backend {
	case SearchSearXNG:
		if base == "" {
			return nil, fmt.Errorf("web search: backend searxng needs url (the SearXNG instance, with its JSON format enabled)")
		}
		return searxng{base: base, client: client}, nil
	case SearchBrave, SearchTavily:
		if c.APIKey == "" {
			return nil, fmt.Errorf("web search: backend %s needs api_key", c.Backend)
		}
		if c.Backend == SearchBrave {
			return brave{base: cmp.Or(base, "https://api.search.brave.com"), key: c.APIKey, client: client}, nil
		}
		return tavily{base: cmp.Or(base, "https://api.tavily.com"), key: c.APIKey, client: client}, nil
	}
	return nil, fmt.Errorf("web search: unknown backend %q (want searxng, brave or tavily)", c.Backend)
}

// searchJSON sends req and decodes a JSON answer into out.
func searchJSON(client *http.Client, req *http.Request, backend string, out any) error {
	req.Header.Set("Accept", "application/json")
	resp, err := client.Do(req)
	if err != nil {
		return fmt.Errorf("%s search: %w", backend, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 4<<20))
	if err != nil {
		return fmt.Errorf("%s search: read the answer: %w", backend, err)
	}
	if resp.StatusCode != http.StatusOK {
		return &searchError{fmt.Errorf("%s search: HTTP %d: %s", backend, resp.StatusCode, workspace.Excerpt(string(body))), resp.StatusCode}
	}
	if err := json.Unmarshal(body, out); err != nil {
		return &searchError{fmt.Errorf("%s search: decode the answer: %w", backend, err), resp.StatusCode}
	}
	return nil
}

// searchError is a backend's answer that is not a list of results.
type searchError struct {
	error
	status int
}

func (e *searchError) Unwrap() error { return e.error }

// contentResults is the answer of SearXNG and Tavily: results with a
// title, a URL and a content snippet.
type contentResults struct {
	Results []struct {
		Title   string `json:"title"`
		URL     string `json:"url"`
		Content string `json:"content"`
	} `json:"results"`
}

// first returns the first n results.
func (c contentResults) first(n int) []SearchResult {
	var res []SearchResult
	for _, r := range c.Results {
		res = append(res, SearchResult{Title: r.Title, URL: r.URL, Snippet: r.Content})
	}
	return firstN(res, n)
}

// searxng queries a SearXNG instance's JSON API (GET /search?format=json).
type searxng struct {
	base   string
	client *http.Client
}

func (searxng) Name() string { return SearchSearXNG }

func (s searxng) Search(ctx context.Context, query string, n int) ([]SearchResult, error) {
	q := url.Values{"q": {query}, "format": {"json"}}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.base+"/search?"+q.Encode(), nil)
	if err != nil {
		return nil, fmt.Errorf("searxng search: %w", err)
	}
	var out contentResults
	if err := searchJSON(s.client, req, "searxng", &out); err != nil {
		// SearXNG answers 403 (or a page) to format=json unless its
		// settings.yml enables it: the usual first-day problem.
		if se := (*searchError)(nil); errors.As(err, &se) && (se.status == http.StatusForbidden || se.status == http.StatusOK) {
			err = fmt.Errorf("%w (does the SearXNG instance at %s answer JSON? It does only when its settings.yml lists json in search.formats)", err, s.base)
		}
		return nil, err
	}
	return out.first(n), nil
}

// brave queries the Brave Search API (GET /res/v1/web/search).
type brave struct {
	base, key string
	client    *http.Client
}

func (brave) Name() string { return SearchBrave }

func (b brave) Search(ctx context.Context, query string, n int) ([]SearchResult, error) {
	q := url.Values{"q": {query}, "count": {strconv.Itoa(n)}}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, b.base+"/res/v1/web/search?"+q.Encode(), nil)
	if err != nil {
		return nil, fmt.Errorf("brave search: %w", err)
	}
	req.Header.Set("X-Subscription-Token", b.key)
	var out struct {
		Web struct {
			Results []struct {
				Title       string `json:"title"`
				URL         string `json:"url"`
				Description string `json:"description"`
			} `json:"results"`
		} `json:"web"`
	}
	if err := searchJSON(b.client, req, "brave", &out); err != nil {
		return nil, err
	}
	var res []SearchResult
	for _, r := range out.Web.Results {
		res = append(res, SearchResult{Title: r.Title, URL: r.URL, Snippet: r.Description})
	}
	return firstN(res, n), nil
}

// tavily queries the Tavily search API (POST /search).
type tavily struct {
	base, key string
	client    *http.Client
}

func (tavily) Name() string { return SearchTavily }

func (t tavily) Search(ctx context.Context, query string, n int) ([]SearchResult, error) {
	body, err := json.Marshal(map[string]any{"query": query, "max_results": n})
	if err != nil {
		return nil, fmt.Errorf("tavily search: %w", err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, t.base+"/search", bytes.NewReader(body))
	if err != nil {
		return nil, fmt.Errorf("tavily search: %w", err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+t.key)
	var out contentResults
	if err := searchJSON(t.client, req, "tavily", &out); err != nil {
		return nil, err
	}
	return out.first(n), nil
}

func firstN(r []SearchResult, n int) []SearchResult {
	if len(r) > n {
		return r[:n]
	}
	return r
}

// WebSearchInput is the input of the WebSearch tool.
type WebSearchInput struct {
	Query      string `json:"query" jsonschema:"the search query"`
	MaxResults int    `json:"max_results,omitempty" jsonschema:"how many results to return, 1 to 20 (default 8)"`
}

const webSearchDescription = `Search the web; returns titles, URLs and snippets. Fetch the pages with WebFetch before relying on them. ` +
	`ReadToolDoc("WebSearch") has the details.`

// NewWebSearch returns the WebSearch tool, searching with o.Search.
func NewWebSearch(o WebOptions) Tool {
	return New("WebSearch", webSearchDescription, true, func(ctx context.Context, in WebSearchInput, _ Call) (Result, error) {
		query := strings.TrimSpace(in.Query)
		if query == "" {
			return Failf(CodeInvalidInput, "WebSearch: query is required"), nil
		}
		n := in.MaxResults
		if n <= 0 {
			n = 8
		}
		n = min(n, 20)
		results, err := o.Search.Search(ctx, query, n)
		if err != nil {
			if ctx.Err() != nil {
				return Result{}, ctx.Err()
			}
			return Errorf("WebSearch: %s", workspace.Excerpt(err.Error())), nil
		}
		if len(results) == 0 {
			return Result{Content: fmt.Sprintf("No results for %q.", query)}, nil
		}
		var b strings.Builder
		fmt.Fprintf(&b, "%d results for %q (%s):\n", len(results), query, o.Search.Name())
		for i, r := range results {
			fmt.Fprintf(&b, "\n%d. %s\n   %s\n", i+1, oneLine(r.Title), r.URL)
			if s := oneLine(r.Snippet); s != "" {
				fmt.Fprintf(&b, "   %s\n", s)
			}
		}
		return Result{Content: b.String()}, nil
	})
}

// oneLine joins s's lines and trims it.
func oneLine(s string) string {
	return strings.Join(strings.Fields(s), " ")
}
