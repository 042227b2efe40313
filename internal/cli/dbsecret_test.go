package cli

import (
	"bytes"
	"strings"
	"testing"
)

// TestDBPasswordInQueryNotPrinted: libpq URLs may carry the password as a
// query parameter (postgres://u@h/db?password=…, and sslpassword for the
// client key). The error of a store that cannot be opened quotes the URL;
// neither password may be printed, for --db or MAESTRO_DB, serve or worker.
func TestDBPasswordInQueryNotPrinted(t *testing.T) {
	t.Parallel()
	const secret, keySecret = "QueryPw-8c1f", "KeyPw-77ad"
	urls := []string{
		"postgres://maestro@127.0.0.1:1/maestro?password=" + secret + "&connect_timeout=5",
		"postgresql://maestro:" + secret + "@127.0.0.1:1/maestro?sslpassword=" + keySecret + "&connect_timeout=5",
		"postgres://maestro@127.0.0.1:1/maestro?connect_timeout=5&%70assword=" + secret,
		// A URL pgx refuses to parse: its own message quotes it too.
		"postgres://maestro@127.0.0.1:1/maestro?sslmode=bogus&password=" + secret,
	}
	for _, u := range urls {
		for _, args := range [][]string{{"worker", "--db", u}, {"serve", "--listen", "127.0.0.1:0", "--db", u}, {"worker"}} {
			var stderr bytes.Buffer
			dir := t.TempDir()
			ios := &IOStreams{In: strings.NewReader(""), Out: &bytes.Buffer{}, ErrOut: &stderr, Getenv: func(k string) string {
				switch k {
				case "MAESTRO_HOME":
					return dir
				case "MAESTRO_DB":
					return u
				}
				return ""
			}}
			code := Run(t.Context(), ios, append(args, "--data-dir", dir))
			out := stderr.String()
			if code != ExitError || !strings.Contains(out, "open PostgreSQL store") {
				t.Errorf("%v: exit %d, stderr %q; want exit %d and the store's error", args, code, out, ExitError)
			}
			if strings.Contains(out, secret) || strings.Contains(out, keySecret) {
				t.Errorf("%v: the error prints a password: %q", args, out)
			}
			if !strings.Contains(out, "xxxxx") {
				t.Errorf("%v: the error does not show where the password was hidden: %q", args, out)
			}
		}
	}
}

func TestRedactURL(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"postgres://u:pw@h/db":                          "postgres://u:xxxxx@h/db",
		"postgres://u@h/db?password=pw&sslmode=require": "postgres://u@h/db?password=xxxxx&sslmode=require",
		"postgres://u@h/db?sslpassword=pw":              "postgres://u@h/db?sslpassword=xxxxx",
		"postgres://u@h/db?application_name=password":   "postgres://u@h/db?application_name=password",
		"postgres://u@h/db?%70assword=pw":               "postgres://u@h/db?password=xxxxx",
		"postgres://u@h/db":                             "postgres://u@h/db",
	} {
		if got := redactURL(in); got != want {
			t.Errorf("redactURL(%q) = %q, want %q", in, got, want)
		}
	}
}
