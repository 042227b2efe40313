package server_test

import (
	"os"
	"regexp"
	"strings"
	"testing"
)

// TestDocsCurlDeclareContentType: every curl example in the documents about
// the API that sends a body (-d, --data…) says what the body is with a
// Content-Type header. The HTTP edge refuses a JSON or YAML body sent as
// curl's default application/x-www-form-urlencoded with 415 (so that a
// browser's form post never acts), so an example without the header fails
// for whoever pastes it.
func TestDocsCurlDeclareContentType(t *testing.T) {
	body := regexp.MustCompile(`(^|\s)(-d|--data|--data-binary|--data-raw)(\s|=)`)
	ctype := regexp.MustCompile(`(?i)content-type|-H "\$J"|--json\s`)
	for _, doc := range []string{"../../README.md", "../../docs/api.md", "../../docs/remote-attach.md", "../../docs/queue.md", "../../docs/web-ui.md", "../../docs/scale-out.md"} {
		data, err := os.ReadFile(doc)
		if err != nil {
			t.Fatal(err)
		}
		lines := strings.Split(string(data), "\n")
		for i := 0; i < len(lines); i++ {
			start := i
			cmd := lines[i]
			// A command continues over lines ending in a backslash.
			for strings.HasSuffix(strings.TrimSpace(cmd), `\`) && i+1 < len(lines) {
				i++
				cmd = strings.TrimSuffix(strings.TrimSpace(cmd), `\`) + " " + lines[i]
			}
			if !strings.Contains(cmd, "curl ") || !body.MatchString(cmd) {
				continue
			}
			if !ctype.MatchString(cmd) {
				t.Errorf("%s:%d: a curl example sends a body without a Content-Type header (the server answers 415):\n%s", strings.TrimPrefix(doc, "../../"), start+1, cmd)
			}
		}
	}
}
