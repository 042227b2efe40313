// Command maestro-fakemodel runs Maestro's fake model server as a
// standalone process: it speaks the Anthropic Messages, OpenAI Chat
// Completions and OpenAI Responses wire formats (streaming), answering each
// request with the next turn of a script, so that real clients — agent
// CLIs, SDKs, curl — can be pointed at it with no network and no key.
//
//	maestro-fakemodel --script turns.json [--listen 127.0.0.1:0] [--loop] [--models a,b]
//	                  [--context-windows a=32768,b=8192 [--ollama | --listing STYLE]]
//
// --context-windows gives models a context window: the OpenAI-format
// model listing carries it as context_length (with --ollama only Ollama's
// POST /api/show tells it, in model_info), and a turn with
// "context_exceeded": true is rejected as too long for it. --listing
// states it as another local server does: vllm (max_model_len in the
// listing), llamacpp (GET /props, and a larger meta.n_ctx_train in the
// listing), lmstudio (GET /api/v0/models/<id>), ollama (as --ollama).
//
// The script is a JSON array of turns (internal/llm/llmtest.Turn):
//
//	[{"text":["Hello ","world"],"input_tokens":10,"output_tokens":2},
//	 {"tool_calls":[{"name":"Bash","input":"{\"command\":\"ls\"}"}]},
//	 {"status":429,"error_message":"slow down","retry_after":"1"}]
//
// Once listening it prints one JSON line on stdout,
// {"url":"http://127.0.0.1:PORT"}, and serves until stdin closes or it is
// signalled. Point clients at it with ANTHROPIC_BASE_URL=<url> or
// OPENAI_BASE_URL=<url>/v1.
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/maestro-run/maestro/internal/httpedge"
	"github.com/maestro-run/maestro/internal/llm/llmtest"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintf(os.Stderr, "maestro-fakemodel: %v\n", err)
		os.Exit(1)
	}
}

func run() error {
	script := flag.String("script", "", "JSON file with the array of scripted turns (required)")
	listen := flag.String("listen", "127.0.0.1:0", "address to listen on (loopback only)")
	loop := flag.Bool("loop", false, "start the script over when it runs out")
	models := flag.String("models", "", "comma-separated model ids to accept and list (default: accept any)")
	windows := flag.String("context-windows", "", "comma-separated model=tokens context windows to state")
	ollama := flag.Bool("ollama", false, "state the windows only in Ollama's /api/show, not in the listing")
	listing := flag.String("listing", "", "state the windows as this server does: vllm, llamacpp, lmstudio or ollama")
	flag.Usage = usage
	flag.Parse()
	if *script == "" {
		return errors.New("--script FILE is required (maestro-fakemodel --help shows an example)")
	}
	turns, err := loadScript(*script)
	if err != nil {
		return err
	}
	host, _, err := net.SplitHostPort(*listen)
	if err != nil {
		return fmt.Errorf("--listen %q: %w", *listen, err)
	}
	if ip := net.ParseIP(host); host != "localhost" && (ip == nil || !ip.IsLoopback()) {
		return fmt.Errorf("--listen %q: only loopback addresses are allowed", *listen)
	}

	srv := llmtest.New(turns...)
	srv.Loop = *loop
	if *models != "" {
		srv.Models = strings.Split(*models, ",")
	}
	if srv.ContextWindows, err = parseWindows(*windows); err != nil {
		return err
	}
	srv.OllamaInfo = *ollama
	if srv.Listing, err = parseListing(*listing); err != nil {
		return err
	}
	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		return fmt.Errorf("listen: %w", err)
	}
	hs := &http.Server{Handler: srv.Handler(), ReadHeaderTimeout: 10 * time.Second}
	go hs.Serve(ln)

	ready, _ := json.Marshal(map[string]string{"url": "http://" + ln.Addr().String()})
	fmt.Println(string(ready))

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	go func() {
		io.Copy(io.Discard, os.Stdin)
		stop()
	}()
	<-ctx.Done()
	shutdown, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	return hs.Shutdown(shutdown)
}

// usage is --help: what the server does, an example, the flags.
func usage() {
	fmt.Fprint(flag.CommandLine.Output(), `maestro-fakemodel serves a scripted fake model on 127.0.0.1: each request to the
Anthropic Messages, OpenAI Chat Completions or OpenAI Responses API (streaming,
in their real wire formats) gets the next turn of the script, so maestro run,
agent CLIs, SDKs or curl can be tried with no network, no key and no cost.
Once listening it prints {"url":"http://127.0.0.1:PORT"} on stdout; it serves
until stdin closes or Ctrl-C. The script format: docs/fakemodel.md.

Usage:
  maestro-fakemodel --script FILE [--listen ADDR] [--loop] [--models a,b]

Example:
  echo '[{"text":["Hello ","world"],"input_tokens":10,"output_tokens":2}]' > turns.json
  maestro-fakemodel --script turns.json --loop          # prints {"url":"http://127.0.0.1:PORT"}
  OPENAI_BASE_URL=http://127.0.0.1:PORT/v1 maestro run --no-piece --model openai/fake "say hello"

Flags:
`)
	flag.PrintDefaults()
}

func loadScript(path string) ([]llmtest.Turn, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read script: %w", err)
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var turns []llmtest.Turn
	if err := dec.Decode(&turns); err != nil {
		var syn *json.SyntaxError
		var typ *json.UnmarshalTypeError
		switch {
		case errors.As(err, &syn):
			line, col := position(data, syn.Offset)
			return nil, fmt.Errorf("%s:%d:%d: %v", path, line, col, err)
		case errors.As(err, &typ):
			line, col := position(data, typ.Offset)
			// In JSON's words, never Go's ("expected []string, got string").
			if typ.Field == "" {
				return nil, fmt.Errorf("%s:%d:%d: expected an array of turns, found JSON %s", path, line, col, typ.Value)
			}
			field, msg, _ := httpedge.JSONTypeError(typ)
			return nil, fmt.Errorf("%s:%d:%d: field %s: %s", path, line, col, field, msg)
		}
		if name, ok := strings.CutPrefix(err.Error(), "json: unknown field "); ok {
			name, _ = strconv.Unquote(name)
			turn, offset := unknownField(data, name)
			line, col := position(data, offset)
			return nil, fmt.Errorf("%s:%d:%d: turn %d: unknown field %q (known: %s)", path, line, col, turn+1, name, knownFields)
		}
		return nil, fmt.Errorf("%s: %w (expected an array of turns)", path, err)
	}
	if len(turns) == 0 {
		return nil, fmt.Errorf("%s: the script has no turns", path)
	}
	return turns, nil
}

// knownFields lists the fields of a turn and of its tool calls, for the
// unknown-field error (docs/fakemodel.md, "The script").
const knownFields = "thinking, text, tool_calls (id, name, input, fragments), input_tokens, output_tokens, " +
	"cache_read_tokens, cache_write_tokens, status, error_message, retry_after, cut_after, context_exceeded"

// unknownField finds the key name that encoding/json refused as unknown
// (its error says which, not where): the first turn that does not decode
// strictly, and the key's byte offset in data (the turn's own when the
// key is not found in its text).
func unknownField(data []byte, name string) (turn int, offset int64) {
	dec := json.NewDecoder(bytes.NewReader(data))
	if _, err := dec.Token(); err != nil { // [
		return 0, 0
	}
	for i := 0; dec.More(); i++ {
		before := dec.InputOffset()
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return i, before
		}
		start := before + int64(bytes.Index(data[before:], raw)) // past a comma and blanks
		strict := json.NewDecoder(bytes.NewReader(raw))
		strict.DisallowUnknownFields()
		if strict.Decode(new(llmtest.Turn)) != nil {
			return i, start + keyOffset(raw, name)
		}
	}
	return 0, 0
}

// keyOffset is the offset in obj of the key name: a quoted name, its
// opening quote not escaped, followed after blanks by a colon; 0 when
// there is none.
func keyOffset(obj []byte, name string) int64 {
	quoted, _ := json.Marshal(name)
	for from := 0; ; {
		i := bytes.Index(obj[from:], quoted)
		if i < 0 {
			return 0
		}
		at := from + i
		rest := bytes.TrimLeft(obj[at+len(quoted):], " \t\r\n")
		if (at == 0 || obj[at-1] != '\\') && len(rest) > 0 && rest[0] == ':' {
			return int64(at)
		}
		from = at + 1
	}
}

// parseWindows reads --context-windows: model=tokens, comma-separated.
func parseWindows(s string) (map[string]int64, error) {
	out := map[string]int64{}
	for item := range strings.SplitSeq(s, ",") {
		if item = strings.TrimSpace(item); item == "" {
			continue
		}
		model, n, ok := strings.Cut(item, "=")
		tokens, err := strconv.ParseInt(n, 10, 64)
		if !ok || model == "" || err != nil || tokens <= 0 {
			return nil, fmt.Errorf("--context-windows: %q is not model=tokens (tokens a positive integer)", item)
		}
		out[model] = tokens
	}
	return out, nil
}

func position(data []byte, offset int64) (line, col int) {
	line, col = 1, 1
	for _, b := range data[:min(int(offset), len(data))] {
		if b == '\n' {
			line++
			col = 1
		} else {
			col++
		}
	}
	return line, col
}

// parseListing reads --listing.
func parseListing(s string) (llmtest.ListingStyle, error) {
	styles := []llmtest.ListingStyle{llmtest.ListingVLLM, llmtest.ListingLlamaCpp, llmtest.ListingLMStudio, llmtest.ListingOllama}
	for _, st := range styles {
		if s == string(st) {
			return st, nil
		}
	}
	if s == "" {
		return llmtest.ListingContextLength, nil
	}
	return "", fmt.Errorf("--listing %q: expected vllm, llamacpp, lmstudio or ollama", s)
}
