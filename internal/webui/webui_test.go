package webui_test

import (
	"bytes"
	"compress/gzip"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/maestro-run/maestro/internal/webui"
)

const (
	indexHTML = `<!doctype html><html><head><script type="module" src="/assets/index-3f2a1b.js"></script></head><body><div id="root"></div></body></html>`
	appJS     = `console.log("the app");`
	appCSS    = `body{margin:0}`
)

func gz(t *testing.T, s string) []byte {
	t.Helper()
	var b bytes.Buffer
	zw := gzip.NewWriter(&b)
	zw.Write([]byte(s))
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// build is a Vite-like build: index.html, hashed assets with .br and .gz
// variants (the .br one a stand-in: the handler never decodes it), a
// favicon without variants, and the placeholder that is never served.
func build(t *testing.T) fstest.MapFS {
	return fstest.MapFS{
		"index.html":                {Data: []byte(indexHTML)},
		"index.html.gz":             {Data: gz(t, indexHTML)},
		"assets/index-3f2a1b.js":    {Data: []byte(appJS)},
		"assets/index-3f2a1b.js.gz": {Data: gz(t, appJS)},
		"assets/index-3f2a1b.js.br": {Data: []byte("BR:" + appJS)},
		"assets/index-9c8d7e.css":   {Data: []byte(appCSS)},
		"favicon.svg":               {Data: []byte(`<svg xmlns="http://www.w3.org/2000/svg"/>`)},
		".gitkeep":                  {Data: nil},
	}
}

func handler(t *testing.T, fsys fstest.MapFS) *webui.Handler {
	t.Helper()
	h, err := webui.New(fsys)
	if err != nil {
		t.Fatal(err)
	}
	return h
}

func get(h http.Handler, method, target string, header ...string) *httptest.ResponseRecorder {
	r := httptest.NewRequest(method, target, nil)
	for i := 0; i+1 < len(header); i += 2 {
		r.Header.Set(header[i], header[i+1])
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return w
}

// TestHandlerRoutes: files by path, index.html for / and client routes,
// 404 for the API, the probes, the metrics, missing hashed assets and
// hidden files; each with its type and caching.
func TestHandlerRoutes(t *testing.T) {
	t.Parallel()
	h := handler(t, build(t))
	tests := []struct {
		name, method, path string
		status             int
		body, ctype, cache string
	}{
		{"root", "GET", "/", 200, indexHTML, "text/html; charset=utf-8", webui.RevalidateCache},
		{"index by name", "GET", "/index.html", 200, indexHTML, "text/html; charset=utf-8", webui.RevalidateCache},
		{"client route", "GET", "/tasks/42", 200, indexHTML, "text/html; charset=utf-8", webui.RevalidateCache},
		{"client route with a dot", "GET", "/tasks/42/deliverables/report.md", 200, indexHTML, "text/html; charset=utf-8", webui.RevalidateCache},
		{"sign-in", "GET", "/signin?next=%2Fschedules", 200, indexHTML, "text/html; charset=utf-8", webui.RevalidateCache},
		{"hashed script", "GET", "/assets/index-3f2a1b.js", 200, appJS, "text/javascript; charset=utf-8", webui.ImmutableCache},
		{"hashed style", "GET", "/assets/index-9c8d7e.css", 200, appCSS, "text/css; charset=utf-8", webui.ImmutableCache},
		{"unhashed file", "GET", "/favicon.svg", 200, `<svg xmlns="http://www.w3.org/2000/svg"/>`, "image/svg+xml", webui.RevalidateCache},
		{"head", "HEAD", "/tasks", 200, "", "text/html; charset=utf-8", webui.RevalidateCache},
		{"missing asset", "GET", "/assets/index-000000.js", 404, "", "text/plain; charset=utf-8", "no-store"},
		{"asset escaping upwards", "GET", "/assets/../../etc/passwd", 200, indexHTML, "text/html; charset=utf-8", webui.RevalidateCache},
		{"unknown API route", "GET", "/api/v1/nothing", 404, "", "text/plain; charset=utf-8", "no-store"},
		{"API root", "GET", "/api", 404, "", "text/plain; charset=utf-8", "no-store"},
		{"healthz", "GET", "/healthz", 404, "", "text/plain; charset=utf-8", "no-store"},
		{"metrics", "GET", "/metrics", 404, "", "text/plain; charset=utf-8", "no-store"},
		{"placeholder", "GET", "/.gitkeep", 404, "", "text/plain; charset=utf-8", "no-store"},
		{"post", "POST", "/", 405, "", "text/plain; charset=utf-8", "no-store"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			w := get(h, tt.method, tt.path)
			if w.Code != tt.status {
				t.Fatalf("%s %s: status %d, want %d\n%s", tt.method, tt.path, w.Code, tt.status, w.Body)
			}
			if tt.body != "" && w.Body.String() != tt.body {
				t.Errorf("body %q, want %q", w.Body, tt.body)
			}
			if tt.method == "HEAD" && w.Body.Len() != 0 {
				t.Errorf("HEAD answered a body: %q", w.Body)
			}
			hd := w.Header()
			for k, want := range map[string]string{
				"Content-Type":            tt.ctype,
				"Cache-Control":           tt.cache,
				"Content-Security-Policy": webui.ContentSecurityPolicy,
				"X-Content-Type-Options":  "nosniff",
				"Referrer-Policy":         "no-referrer",
			} {
				if got := hd.Get(k); got != want {
					t.Errorf("%s: %q, want %q", k, got, want)
				}
			}
			if tt.status == 200 {
				if hd.Get("ETag") == "" {
					t.Error("no ETag")
				}
				if tt.method == "GET" && hd.Get("Content-Length") != strconv.Itoa(w.Body.Len()) {
					t.Errorf("Content-Length %q for a body of %d bytes", hd.Get("Content-Length"), w.Body.Len())
				}
			}
			if tt.status == 405 && hd.Get("Allow") != "GET, HEAD" {
				t.Errorf("Allow: %q", hd.Get("Allow"))
			}
		})
	}
}

// TestHandlerEncoding: the precompressed variant the client prefers,
// q-values honoured, with Vary, Content-Encoding and Content-Length of
// the bytes sent; a file without variants has no Vary.
func TestHandlerEncoding(t *testing.T) {
	t.Parallel()
	h := handler(t, build(t))
	tests := []struct {
		name, path, accept string
		encoding           string // "" identity
	}{
		{"none accepted", "/assets/index-3f2a1b.js", "", ""},
		{"browser", "/assets/index-3f2a1b.js", "gzip, deflate, br, zstd", "br"},
		{"gzip only", "/assets/index-3f2a1b.js", "gzip", "gzip"},
		{"gzip preferred by q", "/assets/index-3f2a1b.js", "br;q=0.5, gzip;q=0.9", "gzip"},
		{"br refused", "/assets/index-3f2a1b.js", "br;q=0, gzip", "gzip"},
		{"identity preferred", "/assets/index-3f2a1b.js", "identity, gzip;q=0.5, br;q=0.5", ""},
		{"wildcard", "/assets/index-3f2a1b.js", "*", "br"},
		{"wildcard refused", "/assets/index-3f2a1b.js", "*;q=0, identity", ""},
		{"case and spaces", "/assets/index-3f2a1b.js", " GZIP ; Q=1 ", "gzip"},
		{"malformed q left out", "/assets/index-3f2a1b.js", "br;q=high, gzip;q=0.1", "gzip"},
		{"index gzip", "/", "br, gzip", "gzip"},
		{"client route gzip", "/schedules", "gzip", "gzip"},
		{"no variants", "/assets/index-9c8d7e.css", "br, gzip", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			w := get(h, "GET", tt.path, "Accept-Encoding", tt.accept)
			if w.Code != 200 {
				t.Fatalf("status %d", w.Code)
			}
			hd := w.Header()
			if got := hd.Get("Content-Encoding"); got != tt.encoding {
				t.Fatalf("Content-Encoding %q, want %q", got, tt.encoding)
			}
			if hd.Get("Content-Length") != strconv.Itoa(w.Body.Len()) {
				t.Errorf("Content-Length %q for %d bytes", hd.Get("Content-Length"), w.Body.Len())
			}
			hasVariants := tt.path != "/assets/index-9c8d7e.css"
			if got := hd.Get("Vary") == "Accept-Encoding"; got != hasVariants {
				t.Errorf("Vary %q; the file has variants: %v", hd.Get("Vary"), hasVariants)
			}
			want := map[string]string{"/assets/index-3f2a1b.js": appJS, "/assets/index-9c8d7e.css": appCSS}[tt.path]
			if want == "" {
				want = indexHTML
			}
			var got string
			switch tt.encoding {
			case "gzip":
				zr, err := gzip.NewReader(w.Body)
				if err != nil {
					t.Fatal(err)
				}
				b, _ := io.ReadAll(zr)
				got = string(b)
			case "br":
				got = strings.TrimPrefix(w.Body.String(), "BR:")
			default:
				got = w.Body.String()
			}
			if got != want {
				t.Errorf("decoded body %q, want %q", got, want)
			}
			if !strings.HasPrefix(hd.Get("Content-Type"), map[bool]string{true: "text/html", false: "text/"}[want == indexHTML]) {
				t.Errorf("Content-Type %q is not the original file's", hd.Get("Content-Type"))
			}
		})
	}
}

// TestHandlerETag: a revalidation with the ETag of the variant sent gets
// 304 without a body; each encoding has its own ETag; a changed file
// (another build) gets a new one.
func TestHandlerETag(t *testing.T) {
	t.Parallel()
	h := handler(t, build(t))
	first := get(h, "GET", "/", "Accept-Encoding", "gzip")
	tag := first.Header().Get("ETag")
	if !strings.HasPrefix(tag, `"`) || !strings.HasSuffix(tag, `"`) {
		t.Fatalf("ETag %q is not a quoted strong tag", tag)
	}
	again := get(h, "GET", "/tasks/7", "Accept-Encoding", "gzip", "If-None-Match", tag)
	if again.Code != http.StatusNotModified || again.Body.Len() != 0 {
		t.Fatalf("revalidation: status %d body %q, want 304 and no body", again.Code, again.Body)
	}
	if again.Header().Get("ETag") != tag || again.Header().Get("Cache-Control") != webui.RevalidateCache {
		t.Errorf("304 headers: %v", again.Header())
	}
	plain := get(h, "GET", "/", "If-None-Match", tag)
	if plain.Code != http.StatusOK || plain.Header().Get("ETag") == tag {
		t.Errorf("identity with the gzip ETag: status %d, ETag %q; want 200 and another tag", plain.Code, plain.Header().Get("ETag"))
	}
	fs2 := build(t)
	fs2["index.html"] = &fstest.MapFile{Data: []byte(indexHTML + "<!-- v2 -->")}
	delete(fs2, "index.html.gz")
	if got := get(handler(t, fs2), "GET", "/", "If-None-Match", plain.Header().Get("ETag")); got.Code != http.StatusOK {
		t.Errorf("a new build's index.html answered %d to the old ETag", got.Code)
	}
}

// TestHandlerNotBuilt: a binary without the app (dist holds only the
// placeholder) answers / and client routes with a page saying how to
// build it, never an error; assets and the API stay 404.
func TestHandlerNotBuilt(t *testing.T) {
	t.Parallel()
	h := handler(t, fstest.MapFS{".gitkeep": {}})
	if h.Built() {
		t.Fatal("Built() with no index.html")
	}
	for _, p := range []string{"/", "/tasks/3"} {
		w := get(h, "GET", p)
		if w.Code != http.StatusOK || !strings.Contains(w.Body.String(), "make web") || w.Header().Get("Content-Type") != "text/html; charset=utf-8" {
			t.Errorf("GET %s: %d %q %q", p, w.Code, w.Header().Get("Content-Type"), w.Body)
		}
		if w.Header().Get("Content-Security-Policy") != webui.ContentSecurityPolicy {
			t.Errorf("GET %s without CSP", p)
		}
	}
	for _, p := range []string{"/assets/index-1.js", "/api/v1/tasks"} {
		if w := get(h, "GET", p); w.Code != http.StatusNotFound {
			t.Errorf("GET %s: %d, want 404", p, w.Code)
		}
	}
	if !handler(t, build(t)).Built() {
		t.Error("Built() false with index.html")
	}
}

// TestEmbeddedBuild: the embedded tree holds the committed app;
// index.html loads no inline script or style (the CSP forbids them) and
// every asset it references is in the build.
func TestEmbeddedBuild(t *testing.T) {
	t.Parallel()
	h, err := webui.New(webui.Dist())
	if err != nil {
		t.Fatal(err)
	}
	if !h.Built() {
		t.Fatal("internal/webui/dist holds no build: run make web and commit internal/webui/dist")
	}
	w := get(h, "GET", "/")
	page := w.Body.String()
	for _, bad := range []string{"<script>", "<style", " style=", "javascript:"} {
		if strings.Contains(page, bad) {
			t.Errorf("index.html has %q, which the CSP blocks", bad)
		}
	}
	for _, attr := range []string{`src="`, `href="`} {
		rest := page
		for {
			_, after, ok := strings.Cut(rest, attr)
			if !ok {
				break
			}
			ref, tail, _ := strings.Cut(after, `"`)
			rest = tail
			if strings.HasPrefix(ref, "/assets/") {
				if got := get(h, "GET", ref); got.Code != http.StatusOK {
					t.Errorf("index.html references %s, which answers %d", ref, got.Code)
				}
			}
		}
	}
}
