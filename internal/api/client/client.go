// Package client is the Go client of Maestro's REST API (`maestro serve`,
// docs/api.md): one method per route, over the request and response types
// of internal/api. `maestro tasks` uses it; so can any Go program that
// drives a Maestro server.
//
// Every call is bounded: short calls by Client's overall timeout, event
// streams and downloads (which may last) by a dial and header timeout and,
// for downloads, an idle timeout. An error answer of the server is an
// *Error carrying the API's error body.
package client

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/maestro-run/maestro/internal/api"
)

// Timeouts of a Client.
const (
	// CallTimeout bounds a short call, answer included.
	CallTimeout = 5 * time.Minute
	// DialTimeout bounds connecting (and the TLS handshake).
	DialTimeout = 10 * time.Second
	// HeaderTimeout bounds the wait for an answer's headers.
	HeaderTimeout = 30 * time.Second
	// DefaultIdleTimeout is how long a download may receive nothing
	// before it is abandoned.
	DefaultIdleTimeout = 60 * time.Second
	// maxAnswer bounds a JSON answer read into memory.
	maxAnswer = 64 << 20
	// maxErrorBody bounds an error answer read.
	maxErrorBody = 1 << 20
)

// Client talks to one Maestro server. Its fields may be set after New and
// before the first call.
type Client struct {
	base  string
	token string
	// hc serves short calls; stream serves event streams and downloads
	// (no overall timeout).
	hc, stream *http.Client

	// AuthHint is appended to the message of a 401 answer (a command
	// line tells how to pass the token).
	AuthHint string
	// IdleTimeout bounds a download's stall (default DefaultIdleTimeout).
	IdleTimeout time.Duration
}

// New returns a client of the server at base (an http:// or https:// URL)
// presenting token as a bearer token when it is not empty. Spaces and
// line breaks around the token are not sent (a header value cannot hold
// them; the server does not count them either).
func New(base, token string) (*Client, error) {
	u, err := url.Parse(base)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("expected an http:// or https:// URL, found %q", base)
	}
	tr := &http.Transport{
		Proxy:                 http.ProxyFromEnvironment,
		DialContext:           (&net.Dialer{Timeout: DialTimeout}).DialContext,
		TLSHandshakeTimeout:   DialTimeout,
		ResponseHeaderTimeout: HeaderTimeout,
	}
	return &Client{
		base:   strings.TrimRight(base, "/"),
		token:  strings.TrimSpace(token),
		hc:     &http.Client{Transport: tr, Timeout: CallTimeout},
		stream: &http.Client{Transport: tr},
	}, nil
}

// Base is the server's base URL.
func (c *Client) Base() string { return c.base }

// Error is an error answer of the server.
type Error struct {
	Status int
	Body   api.Error
	hint   string
	// foreign says where the answer came from when it was not the API's
	// JSON error: another server answered at the address.
	foreign string
}

func (e *Error) Error() string {
	var b strings.Builder
	msg := e.Body.Error
	if msg == "" {
		msg = http.StatusText(e.Status)
	}
	fmt.Fprintf(&b, "server answered %d: %s", e.Status, msg)
	for _, pe := range e.Body.Errors {
		fmt.Fprintf(&b, "\n  %d:%d: %s: %s", pe.Line, pe.Col, pe.Field, pe.Message)
	}
	if e.Status == http.StatusUnauthorized && e.hint != "" {
		b.WriteString(" (" + e.hint + ")")
	}
	if e.foreign != "" {
		b.WriteString(" (" + e.foreign + ")")
	}
	return b.String()
}

// newRequest builds a request to the API path, with the token.
func (c *Client) newRequest(ctx context.Context, method, path string, body io.Reader, ctype string) (*http.Request, error) {
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, body)
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", method, path, err)
	}
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	if ctype != "" {
		req.Header.Set("Content-Type", ctype)
	}
	return req, nil
}

// send sends a request with hc and returns the answer when its status is
// 2xx; otherwise it returns the *Error of the answer.
func (c *Client) send(hc *http.Client, req *http.Request) (*http.Response, error) {
	resp, err := hc.Do(req)
	if err != nil {
		if ue, ok := errors.AsType[*url.Error](err); ok {
			err = ue.Err
		}
		if errors.Is(err, http.ErrSchemeMismatch) {
			// Something answered, in plain HTTP: maestro serve is.
			return nil, fmt.Errorf("%s %s: %w (the server answers plain HTTP: give its address as http://%s)", req.Method, c.base+req.URL.Path, err, req.URL.Host)
		}
		return nil, fmt.Errorf("%s %s: %w (is `maestro serve` running there?)", req.Method, c.base+req.URL.Path, err)
	}
	if resp.StatusCode >= 300 {
		defer resp.Body.Close()
		e := &Error{Status: resp.StatusCode, hint: c.AuthHint}
		if json.NewDecoder(io.LimitReader(resp.Body, maxErrorBody)).Decode(&e.Body) != nil || e.Body.Error == "" {
			// Every error of the API is a JSON object with "error": a
			// 404 "Not Found" in plain text or HTML is another server's.
			e.foreign = c.notAPI()
		}
		if base, ok := strings.CutSuffix(c.base, api.Prefix); ok && e.Status == http.StatusNotFound {
			// Every path is under it already: /api/v1/api/v1/tasks.
			e.foreign = "the address is the server's, without " + api.Prefix + ": " + base
		}
		return nil, e
	}
	return resp, nil
}

// do sends a request and decodes a JSON answer into out (when not nil).
func (c *Client) do(ctx context.Context, method, path string, body io.Reader, ctype string, out any) error {
	req, err := c.newRequest(ctx, method, path, body, ctype)
	if err != nil {
		return err
	}
	resp, err := c.send(c.hc, req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxAnswer))
	if err != nil {
		return fmt.Errorf("%s %s: reading the answer: %w", method, path, err)
	}
	if out == nil {
		return nil
	}
	if err := json.Unmarshal(data, out); err != nil {
		if !json.Valid(data) {
			// Not JSON at all (an HTML page): another server.
			err = fmt.Errorf("%w (%s)", err, c.notAPI())
		}
		return fmt.Errorf("%s %s: unexpected answer: %w", method, path, err)
	}
	return nil
}

// notAPI says that an answer was not the Maestro API's.
func (c *Client) notAPI() string {
	return "the answer is not the Maestro API's: is " + c.base + " the address of maestro serve?"
}

// call sends in (when not nil) as JSON and decodes the answer into out.
func (c *Client) call(ctx context.Context, method, path string, in, out any) error {
	if in == nil {
		return c.do(ctx, method, path, nil, "", out)
	}
	data, err := json.Marshal(in)
	if err != nil {
		return fmt.Errorf("%s %s: encode the request: %w", method, path, err)
	}
	return c.do(ctx, method, path, bytes.NewReader(data), "application/json", out)
}

// get is call for a GET with a query (nil: none).
func (c *Client) get(ctx context.Context, path string, q query, out any) error {
	if enc := url.Values(q).Encode(); enc != "" {
		path += "?" + enc
	}
	return c.call(ctx, http.MethodGet, path, nil, out)
}

// getAs is c.get decoded into a new T.
func getAs[T any](ctx context.Context, c *Client, path string, q query) (T, error) {
	var out T
	err := c.get(ctx, path, q, &out)
	return out, err
}

// callAs is c.call decoded into a new T.
func callAs[T any](ctx context.Context, c *Client, method, path string, in any) (T, error) {
	var out T
	err := c.call(ctx, method, path, in, &out)
	return out, err
}

// query collects the non-zero parameters of a list call.
type query url.Values

func newQuery() query { return query(url.Values{}) }

func (q query) num(name string, v int64) query {
	if v != 0 {
		url.Values(q).Set(name, strconv.FormatInt(v, 10))
	}
	return q
}

func (q query) str(name, v string) query {
	if v != "" {
		url.Values(q).Set(name, v)
	}
	return q
}

func idPath(prefix string, id int64, rest ...string) string {
	return prefix + "/" + strconv.FormatInt(id, 10) + strings.Join(rest, "")
}

// escapePath escapes each segment of a slash-separated path.
func escapePath(p string) string {
	segs := strings.Split(p, "/")
	for i, s := range segs {
		segs[i] = url.PathEscape(s)
	}
	return strings.Join(segs, "/")
}
