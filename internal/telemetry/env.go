package telemetry

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"
)

// Samplers are the values of OTEL_TRACES_SAMPLER the SDK knows.
var samplers = []string{"always_on", "always_off", "traceidratio", "parentbased_always_on", "parentbased_always_off", "parentbased_traceidratio"}

// checkEnv refuses a bad value of the OTEL_* variables the SDK, the OTLP
// exporter and the span processor read, naming the variable and what it
// takes: left to them, a bad value was logged in the SDK's words (or not
// at all) and replaced by a default, and the run went on.
func checkEnv(getenv func(string) string) error {
	sampler := strings.ToLower(strings.TrimSpace(getenv("OTEL_TRACES_SAMPLER")))
	if sampler != "" && !slices.Contains(samplers, sampler) {
		return fmt.Errorf("tracing: OTEL_TRACES_SAMPLER=%s: not one of %s", strings.TrimSpace(getenv("OTEL_TRACES_SAMPLER")), strings.Join(samplers, ", "))
	}
	if arg := strings.TrimSpace(getenv("OTEL_TRACES_SAMPLER_ARG")); arg != "" && strings.HasSuffix(sampler, "traceidratio") {
		if r, err := strconv.ParseFloat(arg, 64); err != nil || r < 0 || r > 1 {
			return fmt.Errorf("tracing: OTEL_TRACES_SAMPLER_ARG=%s: the %s sampler takes the share of traces to keep, from 0 to 1 (e.g. 0.1)", arg, sampler)
		}
	}
	if err := checkPairs("OTEL_RESOURCE_ATTRIBUTES", getenv("OTEL_RESOURCE_ATTRIBUTES"), false); err != nil {
		return err
	}
	for _, key := range []string{"OTEL_EXPORTER_OTLP_HEADERS", "OTEL_EXPORTER_OTLP_TRACES_HEADERS"} {
		if err := checkPairs(key, getenv(key), true); err != nil {
			return err
		}
	}
	for _, key := range []string{"OTEL_EXPORTER_OTLP_COMPRESSION", "OTEL_EXPORTER_OTLP_TRACES_COMPRESSION"} {
		if v := strings.TrimSpace(getenv(key)); v != "" && v != "gzip" && v != "none" {
			return fmt.Errorf("tracing: %s=%s: not one of gzip, none", key, v)
		}
	}
	for _, c := range []struct {
		key string
		min int
	}{
		{"OTEL_EXPORTER_OTLP_TIMEOUT", 0}, {"OTEL_EXPORTER_OTLP_TRACES_TIMEOUT", 0},
		{"OTEL_BSP_SCHEDULE_DELAY", 0}, {"OTEL_BSP_EXPORT_TIMEOUT", 0},
		{"OTEL_BSP_MAX_QUEUE_SIZE", 1}, {"OTEL_BSP_MAX_EXPORT_BATCH_SIZE", 1},
	} {
		v := strings.TrimSpace(getenv(c.key))
		if v == "" {
			continue
		}
		if n, err := strconv.Atoi(v); err != nil || n < c.min {
			what := "a number of milliseconds (e.g. 5000)"
			if c.min > 0 {
				what = "a number of spans, at least 1"
			}
			return fmt.Errorf("tracing: %s=%s: %s", c.key, v, what)
		}
	}
	return checkTLS(getenv)
}

// checkTLS refuses a certificate variable of the OTLP exporter it
// could not use: a CA file (OTEL_EXPORTER_OTLP_CERTIFICATE, the
// TRACES_ form) it cannot read or holding no PEM certificate, a client
// certificate without its key or the other way round (the exporter
// takes the pair of one form), or a pair it cannot read or that is not
// a certificate and its key in PEM. Left to the exporter, each was
// logged in its words (or, a half pair, not at all) and the export went
// on without it.
func checkTLS(getenv func(string) string) error {
	for _, form := range []string{"OTEL_EXPORTER_OTLP_", "OTEL_EXPORTER_OTLP_TRACES_"} {
		ca := form + "CERTIFICATE"
		if path := strings.TrimSpace(getenv(ca)); path != "" {
			b, err := readPEM(ca, path)
			if err != nil {
				return err
			}
			if !x509.NewCertPool().AppendCertsFromPEM(b) {
				return fmt.Errorf("tracing: %s=%s: no PEM certificate in the file: the variable names the PEM file of the CA certificates that sign the collector's", ca, path)
			}
		}
		certKey, keyKey := form+"CLIENT_CERTIFICATE", form+"CLIENT_KEY"
		cert, key := strings.TrimSpace(getenv(certKey)), strings.TrimSpace(getenv(keyKey))
		switch {
		case cert == "" && key == "":
			continue
		case key == "":
			return fmt.Errorf("tracing: %s is set, %s is not: a client certificate takes both, the PEM files of the certificate and of its private key", certKey, keyKey)
		case cert == "":
			return fmt.Errorf("tracing: %s is set, %s is not: a client certificate takes both, the PEM files of the certificate and of its private key", keyKey, certKey)
		}
		cb, err := readPEM(certKey, cert)
		if err != nil {
			return err
		}
		kb, err := readPEM(keyKey, key)
		if err != nil {
			return err
		}
		if _, err := tls.X509KeyPair(cb, kb); err != nil {
			return fmt.Errorf("tracing: %s=%s, %s=%s: not a certificate and its private key in PEM (%v)", certKey, cert, keyKey, key, err)
		}
	}
	return nil
}

// readPEM reads the file a certificate variable names.
func readPEM(key, path string) ([]byte, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		var pe *fs.PathError
		if errors.As(err, &pe) {
			err = pe.Err
		}
		return nil, fmt.Errorf("tracing: %s=%s: cannot read the file: %v", key, path, err)
	}
	return b, nil
}

// checkPairs checks a list of comma-separated key=value pairs, values
// URL-encoded, as the SDK parses OTEL_RESOURCE_ATTRIBUTES and the OTLP
// headers. A header's value may be a secret: it is never quoted.
func checkPairs(key, list string, headers bool) error {
	if strings.TrimSpace(list) == "" {
		return nil
	}
	for i, p := range strings.Split(list, ",") {
		k, v, ok := strings.Cut(p, "=")
		k = strings.TrimSpace(k)
		switch {
		case !ok && headers:
			return fmt.Errorf("tracing: %s: entry %d has no '=': the variable is a comma-separated list of name=value (values URL-encoded)", key, i+1)
		case !ok:
			return fmt.Errorf("tracing: %s: %q has no '=': the variable is a comma-separated list of key=value (values URL-encoded)", key, p)
		case headers && !validHeaderName(k):
			return fmt.Errorf("tracing: %s: %q is not a header name", key, k)
		}
		if _, err := url.PathUnescape(strings.TrimSpace(v)); err != nil {
			return fmt.Errorf("tracing: %s: the value of %s is not URL-encoded (a %% starts %%XX)", key, k)
		}
	}
	return nil
}

// validHeaderName says whether s is an HTTP token, as the OTLP exporter
// checks a header name.
func validHeaderName(s string) bool {
	if s == "" {
		return false
	}
	for _, c := range s {
		if c > 127 || !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.ContainsRune("!#$%&'*+-.^_`|~", c)) {
			return false
		}
	}
	return true
}
