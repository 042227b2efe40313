package tool

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/maestro-run/maestro/internal/netguard"
)

// cpuTime is the process's CPU time so far (user + system).
func cpuTime(t *testing.T) time.Duration {
	t.Helper()
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		t.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// bigPageServer serves pages of size bytes at /hostile ("<td>xxxx"
// repeated: text between tags the parser ignores, which its tree builder
// merges by string concatenation, quadratically) and /large (ordinary
// paragraphs, a script in the head, a marker at the end).
func bigPageServer(t *testing.T, size int) *httptest.Server {
	t.Helper()
	hostile := "<!doctype html><html><body>" + strings.Repeat("<td>xxxx", size/8) + "TAIL-MARKER"
	large := "<!doctype html><html><head><script>" + strings.Repeat("var a = 1;\n", 200_000) + "</script></head><body>" +
		"<p>FIRST-PARAGRAPH</p>" + strings.Repeat("<p>some words of a paragraph</p>\n", size/34) + "<p>TAIL-MARKER</p></body></html>"
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		switch r.URL.Path {
		case "/hostile":
			io.WriteString(w, hostile)
		case "/large":
			io.WriteString(w, large)
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(srv.Close)
	return srv
}

func bigPageFetch(t *testing.T) Tool {
	t.Helper()
	g, err := netguard.New(netguard.Policy{Allow: []string{"127.0.0.1"}, MaxBytes: 8 << 20, Timeout: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	return NewWebFetch(WebOptions{Guard: g})
}

// TestWebFetchHostileHTMLBounded: a page built to make the HTML parser
// quadratic costs WebFetch a bounded amount of CPU (it took minutes for
// 5 MiB, which no cancellation stopped): only the first MaxHTMLConvert
// bytes of markup are converted, with a note. 2 MiB keeps the run on the
// base commit to about a minute of CPU; the bound has a wide margin over
// the few seconds it takes now on a loaded machine.
func TestWebFetchHostileHTMLBounded(t *testing.T) {
	srv := bigPageServer(t, 2<<20)
	fetch := bigPageFetch(t)
	start := cpuTime(t)
	res := call(t, fetch, WebFetchInput{URL: srv.URL + "/hostile"})
	spent := cpuTime(t) - start
	t.Logf("WebFetch of a 2 MiB hostile page: %v of CPU", spent)
	if spent > 20*time.Second {
		t.Errorf("WebFetch of a 2 MiB hostile page took %v of CPU, want well under 20 s", spent)
	}
	wantResult(t, res, false, "xxxx", "only its beginning was converted")
	if strings.Contains(res.Content, "TAIL-MARKER") {
		t.Error("the end of the page was converted: the cap did not apply")
	}
}

// TestWebFetchLargePageCut: an ordinary page over the cap is converted
// from its beginning, its script not counted, and the answer says it was
// cut.
func TestWebFetchLargePageCut(t *testing.T) {
	t.Parallel()
	srv := bigPageServer(t, 1<<20)
	res := call(t, bigPageFetch(t), WebFetchInput{URL: srv.URL + "/large", MaxChars: 1 << 20})
	wantResult(t, res, false, "FIRST-PARAGRAPH", "some words of a paragraph",
		"[Maestro: the page has more than 524288 bytes of HTML (scripts and styles left out); only its beginning was converted.]")
	if strings.Contains(res.Content, "TAIL-MARKER") || strings.Contains(res.Content, "var a") {
		t.Errorf("the answer holds the page's end or its script:\n%.300s", res.Content)
	}
}

func TestHTMLForConversion(t *testing.T) {
	t.Parallel()
	page := `<html><head><style>p{}</style><SCRIPT type="x">if (a < b) { "</p>" }</SCRIPT></head>` +
		`<body><!-- note --><p>one</p><template><p>t</p></template><noscript>n</noscript><p>two</p></body></html>`
	got, cut := htmlForConversion([]byte(page), 1<<20)
	if want := `<html><head></head><body><p>one</p><p>two</p></body></html>`; string(got) != want || cut {
		t.Errorf("htmlForConversion = %q, %v; want %q, false", got, cut, want)
	}
	got, cut = htmlForConversion([]byte(page), 27)
	if want := `<html><head></head><body>`; string(got) != want || !cut {
		t.Errorf("htmlForConversion(max 27) = %q, %v; want %q, true (cut at a token boundary)", got, cut, want)
	}
}
