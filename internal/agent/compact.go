package agent

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/maestro-run/maestro/internal/llm"
	"github.com/maestro-run/maestro/internal/protocol"
)

// DefaultCompactAt is the share of the context window at which the next
// request is compacted first (Config.CompactAt).
const DefaultCompactAt = 0.85

// Compaction budgets, as shares of the context window: the recent turns
// kept verbatim, and the transcript one summarising call reads.
const (
	keepShare  = 0.25
	chunkShare = 0.5
)

// compactRetryShare: after a compaction before a call fails, the next
// request must have grown by window/compactRetryShare tokens before the
// loop tries again.
const compactRetryShare = 10

// maxReactiveCompactions bounds the compactions one model call may cause
// when the provider keeps answering that the prompt is too long.
const maxReactiveCompactions = 2

// summaryMaxTokens caps one summarising response.
const summaryMaxTokens = 4096

// statusTooLong is the status before a compaction the provider forced
// (wire contract §8.8).
const statusTooLong = "Prompt exceeded the context window. Compacting history and continuing automatically..."

// summaryHeader opens the summary message the model sees.
const summaryHeader = "[Maestro compacted the earlier conversation to fit the context window. Summary of it:]\n\n"

// compactSystem is the system prompt of a summarising call.
const compactSystem = "You compact the conversation of a coding agent so that it can continue its work with less context. " +
	"Write a faithful, dense summary in plain text: the user's requests and constraints, what was done (files read, written " +
	"and edited, commands run and their outcome), decisions and why, errors met and how they were handled, and what is " +
	"still open or was about to be done next. Keep exact file paths, identifiers and values. Do not invent anything."

// errNothingToCompact: the conversation has no older turns to summarise.
var errNothingToCompact = errors.New("the conversation has no older turns to compact")

// statedMaximum finds the window a provider's "too long" error states:
// Anthropic "prompt is too long: N tokens > M maximum", OpenAI and vLLM
// "maximum context length is M tokens", llama.cpp "request (N tokens)
// exceeds the available context size (M tokens)". 0 when it states none.
func statedMaximum(err error) int64 {
	e, ok := errors.AsType[*llm.Error](err)
	if !ok {
		return 0
	}
	for _, re := range statedMaximumRes {
		if m := re.FindStringSubmatch(e.Message); m != nil {
			if n, err := strconv.ParseInt(m[1], 10, 64); err == nil && n > 0 {
				return n
			}
		}
	}
	return 0
}

var statedMaximumRes = []*regexp.Regexp{
	regexp.MustCompile(`tokens > (\d+) maximum`),
	regexp.MustCompile(`(?i)maximum context length is (\d+) tokens`),
	regexp.MustCompile(`(?i)context size \((\d+) tokens\)`),
}

// tokensOf estimates the tokens of a text (about four bytes a token).
func tokensOf(s string) int64 { return int64(len(s)+3) / 4 }

// messageTokens estimates the tokens a message takes in a request.
func messageTokens(m llm.Message) int64 {
	n := int64(4)
	for _, p := range m.Parts {
		switch p.Type {
		case llm.PartText, llm.PartThinking:
			n += tokensOf(p.Text)
		case llm.PartToolCall:
			n += 8 + tokensOf(p.ToolCall.Name) + tokensOf(string(p.ToolCall.Input))
		case llm.PartToolResult:
			n += 8 + tokensOf(p.ToolResult.Content)
		case llm.PartImage:
			n += 1500
		}
	}
	return n
}

// EstimateTokens estimates the tokens of a request (system prompt, tool
// specs, messages). Providers count exactly; the loop uses this for what
// no response has measured yet.
func EstimateTokens(req *llm.Request) int64 {
	n := tokensOf(req.System)
	for _, t := range req.Tools {
		n += tokensOf(t.Name) + tokensOf(t.Description) + tokensOf(string(t.InputSchema))
	}
	for _, m := range req.Messages {
		n += messageTokens(m)
	}
	return n
}

// nextTokens estimates the next request over msgs: the last call's
// measured context plus what was added since, else an estimate of all.
func (r *run) nextTokens(msgs []llm.Message) int64 {
	if r.measured > 0 && r.measuredLen <= len(msgs) {
		n := r.measured
		for _, m := range msgs[r.measuredLen:] {
			n += messageTokens(m)
		}
		return n
	}
	return EstimateTokens(r.request(msgs))
}

// shouldCompact says whether the next request reaches CompactAt of the
// window.
func (r *run) shouldCompact(msgs []llm.Message) (int64, bool) {
	at := r.a.cfg.CompactAt
	if r.window <= 0 || at < 0 {
		return 0, false
	}
	if at == 0 {
		at = DefaultCompactAt
	}
	n := r.nextTokens(msgs)
	if n < r.retryCompactAt {
		return n, false
	}
	return n, float64(n) >= at*float64(r.window)
}

// budgetWindow is the window compaction budgets are shares of: the
// model's, else llm.DefaultContextWindow (a provider rejected a request
// of a model whose window is unknown).
func (r *run) budgetWindow() int64 {
	if r.window > 0 {
		return r.window
	}
	return llm.DefaultContextWindow
}

// keepBudget is the size of the recent turns a compaction keeps: a
// quarter of the window, and at most half the compaction threshold, so
// that what is kept is not itself over it (with compact_at: 0.2, the
// quarter kept was, and every call after the first compaction compacted
// again).
func (r *run) keepBudget() int64 {
	share := keepShare
	if at := r.a.cfg.CompactAt; at > 0 && at/2 < share {
		share = at / 2
	}
	return int64(share * float64(r.budgetWindow()))
}

// keepFrom returns the index of the first message kept verbatim: the
// earliest assistant message after which the rest fits the keep budget
// (at least the last assistant message, so a tool call and its results
// stay together), and never 0, so something older is summarised.
func keepFrom(msgs []llm.Message, budget int64) int {
	from, size := -1, int64(0)
	for i := len(msgs) - 1; i >= 1; i-- {
		size += messageTokens(msgs[i])
		if msgs[i].Role != llm.RoleAssistant {
			continue
		}
		if from >= 0 && size > budget {
			break
		}
		from = i
	}
	return from
}

// compact summarises the older turns of msgs with the model and replaces
// them with the summary: the events and the summary message go to the
// sink. forced says the provider rejected the request as too long.
func (r *run) compact(ctx context.Context, msgs *[]llm.Message, before int64, forced bool) error {
	start := r.a.cfg.Now()
	if before <= 0 {
		before = r.nextTokens(*msgs)
	}
	k := keepFrom(*msgs, r.keepBudget())
	if k <= 0 || (k == 1 && (*msgs)[0].Compaction != nil && !forced) {
		// Nothing older, or only the last summary: what is left is the
		// recent turns themselves.
		return errNothingToCompact
	}
	if forced {
		r.sink.Event(protocol.Status{Message: statusTooLong})
	} else {
		r.sink.Event(protocol.Status{Message: fmt.Sprintf("The next request would fill %d%% of the context window (%d of %d tokens). Compacting history and continuing automatically...",
			before*100/r.window, before, r.window)})
	}
	summary, err := r.summarize(ctx, (*msgs)[:k])
	if err != nil {
		return err
	}
	kept := (*msgs)[k:]
	m := llm.Message{Role: llm.RoleUser, Parts: []llm.Part{llm.Text(summaryHeader + summary)}}
	after := EstimateTokens(r.request(append([]llm.Message{m}, kept...)))
	m.Compaction = &llm.Compaction{Kept: len(kept), TokensBefore: before, TokensAfter: after}
	r.sink.Event(protocol.Compaction{
		Summary: summary, FirstKeptEntryIndex: k, TokensBefore: before, Auto: true,
		Timestamp: r.a.cfg.Now().UTC().Format(time.RFC3339Nano),
	})
	r.sink.Event(protocol.Status{Message: fmt.Sprintf("Compacted the conversation: about %d → %d tokens (%d recent messages kept) in %s",
		before, after, len(kept), r.a.cfg.Now().Sub(start).Round(time.Millisecond))})
	r.res.Compactions++
	r.retryCompactAt = 0
	*msgs = llm.AppendHistory(*msgs, m)
	r.res.Messages = append(r.res.Messages, m)
	r.sink.Message(m)
	r.measured, r.measuredLen = 0, 0
	return nil
}

// summarize asks the model for a summary of older, a transcript at a
// time: each call reads the summary so far and the next chunk.
func (r *run) summarize(ctx context.Context, older []llm.Message) (string, error) {
	chunkChars := int(chunkShare * float64(r.budgetWindow()) * 4)
	summary := ""
	for _, chunk := range transcript(older, chunkChars) {
		var b strings.Builder
		if summary != "" {
			b.WriteString("Summary of the conversation before this part:\n<summary>\n" + summary + "\n</summary>\n\n")
		}
		b.WriteString("The conversation to summarise:\n<conversation>\n" + chunk + "</conversation>\n\n" +
			"Write the summary of everything above now (it replaces the conversation).")
		text, err := r.complete(ctx, &llm.Request{System: compactSystem, Messages: []llm.Message{llm.UserText(b.String())}, MaxTokens: summaryMaxTokens})
		if err != nil {
			return "", fmt.Errorf("summarise the conversation: %w", err)
		}
		summary = text
	}
	if strings.TrimSpace(summary) == "" {
		return "", errors.New("summarise the conversation: the model answered with no text")
	}
	return summary, nil
}

// complete runs one model call that the client does not see as a
// response, and returns its text; its usage is accounted.
func (r *run) complete(ctx context.Context, req *llm.Request) (string, error) {
	cfg := r.a.cfg
	for ev, err := range cfg.Provider.Stream(ctx, req) {
		if err != nil {
			return "", err
		}
		if ev.Type == llm.EventDone && ev.Response != nil {
			model := cfg.Provider.Model()
			if ev.Response.Model != "" {
				model = ev.Response.Model
			}
			r.account(model, ev.Response.Usage)
			r.res.SummaryCalls++
			return ev.Response.Message.TextContent(), nil
		}
	}
	return "", &llm.Error{Kind: llm.KindStream, Provider: cfg.Provider.Name(), Message: "the stream ended without a final response"}
}

// transcript renders msgs as text in chunks of about max bytes, split at
// message boundaries; one part longer than a chunk is shortened.
func transcript(msgs []llm.Message, max int) []string {
	partMax := max / 2
	var chunks []string
	var b strings.Builder
	for _, m := range msgs {
		var s strings.Builder
		for _, p := range m.Parts {
			switch p.Type {
			case llm.PartText:
				if m.Compaction != nil {
					s.WriteString("[Earlier summary] " + clip(strings.TrimPrefix(p.Text, summaryHeader), partMax) + "\n")
				} else {
					s.WriteString(strings.ToUpper(string(m.Role)[:1]) + string(m.Role)[1:] + ": " + clip(p.Text, partMax) + "\n")
				}
			case llm.PartToolCall:
				s.WriteString("[tool call " + p.ToolCall.Name + "] " + clip(string(p.ToolCall.Input), partMax) + "\n")
			case llm.PartToolResult:
				status := "result"
				if p.ToolResult.IsError {
					status = "error"
				}
				s.WriteString("[tool " + status + " " + p.ToolResult.Name + "] " + clip(p.ToolResult.Content, partMax) + "\n")
			case llm.PartImage:
				s.WriteString("[image]\n")
			}
		}
		if b.Len() > 0 && b.Len()+s.Len() > max {
			chunks = append(chunks, b.String())
			b.Reset()
		}
		b.WriteString(s.String())
	}
	if b.Len() > 0 {
		chunks = append(chunks, b.String())
	}
	return chunks
}

// clip shortens s to about max bytes, keeping its start and end.
func clip(s string, max int) string {
	if max <= 0 || len(s) <= max {
		return s
	}
	head := strings.ToValidUTF8(s[:max*3/4], "")
	tail := strings.ToValidUTF8(s[len(s)-max/4:], "")
	return fmt.Sprintf("%s\n[… %d bytes left out …]\n%s", head, len(s)-len(head)-len(tail), tail)
}
