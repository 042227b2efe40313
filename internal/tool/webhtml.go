package tool

import (
	"bytes"
	"strings"

	"golang.org/x/net/html"
)

// MaxHTMLConvert bounds the HTML WebFetch converts to markdown, counted
// after scripts, styles and comments are dropped (the converter drops
// them too). Building the tree is quadratic on some inputs (text between
// tags the parser ignores, such as "<td>x" repeated, is merged by string
// concatenation): a hostile 5 MiB page took minutes of CPU that no
// cancellation could stop. 512 KiB of markup is far more than the
// 60,000 characters WebFetch returns, and costs at most about a second.
const MaxHTMLConvert = 512 << 10

// htmlForConversion returns page without its script, style and template
// contents and comments (one linear pass of the tokenizer), cut at a
// token boundary before max bytes; cut reports that something was left
// out for the cap.
func htmlForConversion(page []byte, max int) (out []byte, cut bool) {
	z := html.NewTokenizer(bytes.NewReader(page))
	var b bytes.Buffer
	skip := "" // the element whose raw contents are being skipped
	for {
		tt := z.Next()
		if tt == html.ErrorToken {
			return b.Bytes(), false
		}
		raw := z.Raw()
		switch tt {
		case html.CommentToken:
			continue
		case html.StartTagToken:
			name, _ := z.TagName()
			if n := string(name); skip == "" && (n == "script" || n == "style" || n == "template" || n == "noscript") {
				skip = n
				continue
			}
		case html.EndTagToken:
			name, _ := z.TagName()
			if skip != "" && strings.EqualFold(string(name), skip) {
				skip = ""
				continue
			}
		}
		if skip != "" {
			continue
		}
		if b.Len()+len(raw) > max {
			return b.Bytes(), true
		}
		b.Write(raw)
	}
}
