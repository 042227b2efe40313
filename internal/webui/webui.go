// Package webui serves Maestro's web app (the console of `maestro serve`,
// docs/web-ui.md) from the build committed in internal/webui/dist/ (made
// from web/ by `make web`), embedded in the binary so that `go build`
// alone yields a server with its UI.
//
// The Handler answers GET and HEAD: a file of the build by its path,
// index.html for / and for every client route (the app routes in the
// browser), 404 for /api/…, /healthz, /readyz, /metrics and missing files
// under /assets/. Files under /assets/ carry a content hash in their names
// (Vite) and are cached for a year as immutable; everything else, above
// all index.html, is revalidated on every load (ETag, 304). A file with
// precompressed siblings (name.br, name.gz) is sent in the encoding the
// client prefers (Accept-Encoding, q-values honoured). Every answer
// carries the strict Content-Security-Policy of the DOM contract
// (docs/web-ui.md), nosniff and no-referrer. A binary built without the
// app answers / with a short page saying how to build it.
package webui

import (
	"crypto/sha256"
	"embed"
	"encoding/base64"
	"fmt"
	"io/fs"
	"mime"
	"net/http"
	"path"
	"strconv"
	"strings"
)

// dist is the built app (web/ → `make web`). Without a build it holds
// only .gitkeep, which is never served.
//
//go:embed all:dist
var dist embed.FS

// Dist returns the embedded build: the tree of internal/webui/dist/.
func Dist() fs.FS {
	sub, err := fs.Sub(dist, "dist")
	if err != nil {
		panic(fmt.Sprintf("webui: the embedded build has no dist directory: %v", err)) // cannot happen: the embed pattern names it
	}
	return sub
}

// Headers every answer of the Handler carries.
const (
	// ContentSecurityPolicy allows the app's own scripts, styles, images
	// (and data:/blob: images for previews), fonts and API calls, nothing
	// inline, no plugins, no framing, no foreign form targets.
	ContentSecurityPolicy = "default-src 'self'; script-src 'self'; style-src 'self'; " +
		"img-src 'self' data: blob:; connect-src 'self'; font-src 'self'; object-src 'none'; " +
		"base-uri 'none'; frame-ancestors 'none'; form-action 'self'"
	// ImmutableCache is the Cache-Control of hashed assets (/assets/…).
	ImmutableCache = "public, max-age=31536000, immutable"
	// RevalidateCache is the Cache-Control of index.html and the other
	// unhashed files: a cached copy is used only after an ETag check.
	RevalidateCache = "no-cache"
)

// indexFile is the app's entry page, answered for client routes.
const indexFile = "index.html"

// encodings are the precompressed variants a build may hold, in order of
// preference when the client accepts several equally: the file name's
// suffix and the Content-Encoding it is sent with.
var encodings = [...]struct{ suffix, name string }{{".br", "br"}, {".gz", "gzip"}}

// variant is one encoding of a file.
type variant struct {
	encoding string // "" for the file as it is
	data     []byte
	etag     string
}

// file is a file of the build with its precompressed variants.
type file struct {
	contentType string
	cache       string
	plain       variant
	compressed  []variant // in the order of encodings
}

// Handler serves a build; see the package documentation.
type Handler struct {
	files map[string]*file // by slash path without leading slash
	built bool             // index.html is there
}

// New reads the build in fsys (the tree of dist/: index.html at its root,
// hashed files under assets/) into memory and returns its handler. A
// build without index.html gives a handler that answers / with the page
// saying how to build the app.
func New(fsys fs.FS) (*Handler, error) {
	h := &Handler{files: map[string]*file{}}
	raw := map[string][]byte{}
	err := fs.WalkDir(fsys, ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if p != "." && hidden(p) {
			if d.IsDir() {
				return fs.SkipDir
			}
			return nil
		}
		if d.IsDir() || !d.Type().IsRegular() {
			return nil
		}
		data, err := fs.ReadFile(fsys, p)
		if err != nil {
			return err
		}
		raw[p] = data
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("webui: read the build: %w", err)
	}
	for p, data := range raw {
		if compressedName(p) && raw[strings.TrimSuffix(p, path.Ext(p))] != nil {
			continue // a variant of another file, served as that file
		}
		f := &file{contentType: contentType(p), cache: RevalidateCache, plain: newVariant("", data)}
		if strings.HasPrefix(p, "assets/") {
			f.cache = ImmutableCache
		}
		for _, e := range encodings {
			if c, ok := raw[p+e.suffix]; ok {
				f.compressed = append(f.compressed, newVariant(e.name, c))
			}
		}
		h.files[p] = f
	}
	_, h.built = h.files[indexFile]
	return h, nil
}

// Built reports whether the build holds the app (its index.html).
func (h *Handler) Built() bool { return h.built }

func newVariant(encoding string, data []byte) variant {
	sum := sha256.Sum256(data)
	tag := base64.RawURLEncoding.EncodeToString(sum[:12])
	if encoding != "" {
		tag += "-" + encoding
	}
	return variant{encoding: encoding, data: data, etag: `"` + tag + `"`}
}

// compressedName reports whether a path names a precompressed variant.
func compressedName(p string) bool {
	for _, e := range encodings {
		if strings.HasSuffix(p, e.suffix) {
			return true
		}
	}
	return false
}

// hidden reports whether a path has a component starting with a dot
// (.gitkeep, .vite/): those are never served.
func hidden(p string) bool {
	for c := range strings.SplitSeq(p, "/") {
		if strings.HasPrefix(c, ".") {
			return true
		}
	}
	return false
}

// contentTypes are the types of the files a Vite build holds, fixed here
// rather than taken from the system's MIME table, which varies.
var contentTypes = map[string]string{
	".html":        "text/html; charset=utf-8",
	".js":          "text/javascript; charset=utf-8",
	".mjs":         "text/javascript; charset=utf-8",
	".css":         "text/css; charset=utf-8",
	".json":        "application/json",
	".map":         "application/json",
	".webmanifest": "application/manifest+json",
	".svg":         "image/svg+xml",
	".png":         "image/png",
	".jpg":         "image/jpeg",
	".jpeg":        "image/jpeg",
	".gif":         "image/gif",
	".webp":        "image/webp",
	".avif":        "image/avif",
	".ico":         "image/x-icon",
	".woff":        "font/woff",
	".woff2":       "font/woff2",
	".ttf":         "font/ttf",
	".txt":         "text/plain; charset=utf-8",
	".wasm":        "application/wasm",
}

func contentType(p string) string {
	ext := strings.ToLower(path.Ext(p))
	if t, ok := contentTypes[ext]; ok {
		return t
	}
	if t := mime.TypeByExtension(ext); t != "" {
		return t
	}
	return "application/octet-stream"
}

// ServeHTTP implements http.Handler.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	hd := w.Header()
	hd.Set("Content-Security-Policy", ContentSecurityPolicy)
	hd.Set("X-Content-Type-Options", "nosniff")
	hd.Set("Referrer-Policy", "no-referrer")
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		hd.Set("Allow", "GET, HEAD")
		plain(w, http.StatusMethodNotAllowed, fmt.Sprintf("method %s not allowed: the web app answers GET and HEAD", r.Method))
		return
	}
	p := strings.TrimPrefix(path.Clean("/"+r.URL.Path), "/")
	if !ClientRoute(r.URL.Path) {
		plain(w, http.StatusNotFound, fmt.Sprintf("no route %s %s; see docs/api.md", r.Method, r.URL.Path))
		return
	}
	f, ok := h.files[p]
	switch {
	case ok:
	case hidden(p):
		plain(w, http.StatusNotFound, "not found: "+r.URL.Path)
		return
	case strings.HasPrefix(p, "assets/"):
		// A hashed file of another build (a tab open across an upgrade):
		// an HTML page in its place would only fail to parse.
		plain(w, http.StatusNotFound, "no such file in this build: "+r.URL.Path+"; reload the page")
		return
	case !h.built:
		h.notBuilt(w, r)
		return
	default:
		f = h.files[indexFile]
	}
	v := f.choose(r.Header.Get("Accept-Encoding"))
	hd.Set("Content-Type", f.contentType)
	hd.Set("Cache-Control", f.cache)
	hd.Set("ETag", v.etag)
	if len(f.compressed) > 0 {
		hd.Add("Vary", "Accept-Encoding")
	}
	if v.encoding != "" {
		hd.Set("Content-Encoding", v.encoding)
	}
	if noneMatch(r.Header.Get("If-None-Match"), v.etag) {
		hd.Del("Content-Type")
		w.WriteHeader(http.StatusNotModified)
		return
	}
	// No ranges: the files are small, and a whole answer is always valid.
	hd.Set("Content-Length", strconv.Itoa(len(v.data)))
	w.WriteHeader(http.StatusOK)
	if r.Method != http.MethodHead {
		w.Write(v.data)
	}
}

// noneMatch reports whether an If-None-Match header names etag (weak
// comparison, RFC 9110 §13.1.2) or is "*".
func noneMatch(header, etag string) bool {
	for t := range strings.SplitSeq(header, ",") {
		t = strings.TrimPrefix(strings.TrimSpace(t), "W/")
		if t == "*" || t == etag {
			return true
		}
	}
	return false
}

// ClientRoute reports whether a request path may be one of the app's
// (a file of the build or a route the app handles in the browser): not
// the API, the probes or the metrics, which other handlers answer.
func ClientRoute(p string) bool {
	p = path.Clean("/" + p)
	switch {
	case p == "/api" || strings.HasPrefix(p, "/api/"),
		p == "/healthz", p == "/readyz", p == "/metrics":
		return false
	}
	return true
}

// notBuilt answers a binary built without the app: a page that says so
// and how to build it, never an error.
func (h *Handler) notBuilt(w http.ResponseWriter, r *http.Request) {
	hd := w.Header()
	hd.Set("Content-Type", "text/html; charset=utf-8")
	hd.Set("Cache-Control", "no-store")
	w.WriteHeader(http.StatusOK)
	if r.Method == http.MethodHead {
		return
	}
	fmt.Fprint(w, NotBuiltPage)
}

// NotBuiltPage is the answer to / of a binary built without the web app.
const NotBuiltPage = `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>Maestro: web UI not built</title></head>
<body><h1>The web UI is not built into this binary</h1>
<p>This <code>maestro serve</code> answers its REST API under <code>/api/v1/</code> (see docs/api.md), but its
binary was built without the web app. Build the app and then the binary, from a clone of the repository:</p>
<pre>make web     # npm ci and npm run build in web/, into internal/webui/dist/
make build   # or: go build ./cmd/maestro</pre>
<p>See docs/web-ui.md.</p></body></html>
`

func plain(w http.ResponseWriter, status int, msg string) {
	hd := w.Header()
	hd.Set("Content-Type", "text/plain; charset=utf-8")
	hd.Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	fmt.Fprintln(w, msg)
}

// choose picks the variant of f to send for an Accept-Encoding header:
// the acceptable encoding of highest q-value (a tie goes to the earlier
// of encodings, then to the file as it is); the file as it is when no
// variant is acceptable.
func (f *file) choose(acceptEncoding string) variant {
	if len(f.compressed) == 0 {
		return f.plain
	}
	q := parseAcceptEncoding(acceptEncoding)
	best, bestQ := f.plain, q.of("identity")
	for _, v := range f.compressed {
		if vq := q.of(v.encoding); vq > 0 && vq >= bestQ {
			if vq > bestQ || best.encoding == "" {
				best, bestQ = v, vq
			}
		}
	}
	return best
}

// acceptEncoding is a parsed Accept-Encoding header: q-values by coding.
type acceptEncoding map[string]float64

// parseAcceptEncoding parses "br;q=1.0, gzip;q=0.8, *;q=0" (RFC 9110
// §12.5.3). A coding with a malformed q-value is left out.
func parseAcceptEncoding(s string) acceptEncoding {
	q := acceptEncoding{}
	for part := range strings.SplitSeq(s, ",") {
		name, params, _ := strings.Cut(part, ";")
		name = strings.ToLower(strings.TrimSpace(name))
		if name == "" {
			continue
		}
		v, ok := 1.0, true
		for p := range strings.SplitSeq(params, ";") {
			k, val, found := strings.Cut(strings.TrimSpace(p), "=")
			if found && strings.EqualFold(strings.TrimSpace(k), "q") {
				f, err := strconv.ParseFloat(strings.TrimSpace(val), 64)
				if err != nil || f < 0 || f > 1 {
					ok = false
				}
				v = f
			}
		}
		if ok {
			q[name] = v
		}
	}
	return q
}

// of is the q-value of a coding: its own, else the wildcard's; a coding
// not named is not acceptable, except identity, which is acceptable
// (least preferred) unless excluded.
func (q acceptEncoding) of(coding string) float64 {
	if v, ok := q[coding]; ok {
		return v
	}
	if v, ok := q["*"]; ok {
		if coding == "identity" && v == 0 {
			return 0
		}
		if coding != "identity" {
			return v
		}
	}
	if coding == "identity" {
		return 0.001
	}
	return 0
}
