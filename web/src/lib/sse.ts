// A Server-Sent Events reader over fetch, for the job event stream
// (docs/api.md, "Event stream (SSE)"). EventSource cannot send the
// Authorization header, so the stream is read by hand: the parser follows the
// WHATWG event-stream format (fields id, event, data, retry; comments
// ignored), and follow() reconnects after a drop with Last-Event-ID set to the
// last id it delivered.

export interface SSEMessage {
  id: string | undefined;
  event: string;
  data: string;
}

export class SSEParser {
  private buf = "";
  private data: string[] = [];
  private event = "";
  private id: string | undefined;
  retry: number | undefined;

  // feed takes the next decoded chunk and returns the messages it completed.
  feed(chunk: string): SSEMessage[] {
    this.buf += chunk;
    const out: SSEMessage[] = [];
    for (;;) {
      const m = /\r\n|\r|\n/.exec(this.buf);
      if (!m) break;
      // A lone \r at the end may be the first half of \r\n: wait for more.
      if (m[0] === "\r" && m.index === this.buf.length - 1) break;
      const line = this.buf.slice(0, m.index);
      this.buf = this.buf.slice(m.index + m[0].length);
      this.line(line, out);
    }
    return out;
  }

  private line(line: string, out: SSEMessage[]): void {
    if (line === "") {
      if (this.data.length > 0) {
        out.push({ id: this.id, event: this.event || "message", data: this.data.join("\n") });
      }
      this.data = [];
      this.event = "";
      this.id = undefined;
      return;
    }
    if (line.startsWith(":")) return;
    const colon = line.indexOf(":");
    const field = colon < 0 ? line : line.slice(0, colon);
    let value = colon < 0 ? "" : line.slice(colon + 1);
    if (value.startsWith(" ")) value = value.slice(1);
    switch (field) {
      case "data":
        this.data.push(value);
        break;
      case "event":
        this.event = value;
        break;
      case "id":
        if (!value.includes("\0")) this.id = value;
        break;
      case "retry":
        if (/^\d+$/.test(value)) this.retry = Number(value);
        break;
    }
  }
}

export interface FollowOptions {
  url: string;
  fetch?: typeof fetch;
  headers: () => Record<string, string>;
  // cursor returns the last id the caller kept; it is sent as Last-Event-ID.
  cursor: () => number;
  onMessages: (msgs: SSEMessage[]) => void;
  onConnected: (connected: boolean) => void;
  onUnauthorized: () => void;
  signal: AbortSignal;
  // wait is the pause before a reconnect (tests pass one that resolves at once).
  wait?: (ms: number, signal: AbortSignal) => Promise<void>;
  // idleMs is how long a connection may stay silent before it is given up
  // and made again (default 45 s: three of the server's 15 s keepalives).
  idleMs?: number;
}

function sleep(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    const t = setTimeout(resolve, ms);
    signal.addEventListener("abort", () => {
      clearTimeout(t);
      resolve();
    });
  });
}

// follow reads the stream until an `end` event, the signal aborts or the
// server answers 401/404; after any other drop it reconnects (after the
// server's `retry:` delay, 2 s by default, up to 30 s when failures repeat)
// from the cursor.
export async function follow(o: FollowOptions): Promise<"end" | "aborted" | "unauthorized" | "not_found"> {
  const f = o.fetch ?? fetch;
  const wait = o.wait ?? sleep;
  let retry = 2000;
  let failures = 0;
  const idle = o.idleMs ?? 45_000;
  while (!o.signal.aborted) {
    let ended = false;
    // A connection that goes silent past the keepalives is given up: a
    // network that dropped without a reset (a laptop asleep, a proxy)
    // left the log "● live" and frozen for ever.
    const conn = new AbortController();
    const stop = () => conn.abort();
    o.signal.addEventListener("abort", stop);
    let timer: ReturnType<typeof setTimeout> | undefined;
    const arm = () => {
      clearTimeout(timer);
      timer = setTimeout(stop, idle);
    };
    try {
      const headers: Record<string, string> = { Accept: "text/event-stream", ...o.headers() };
      const cur = o.cursor();
      if (cur > 0) headers["Last-Event-ID"] = String(cur);
      arm();
      const res = await f(o.url, { headers, signal: conn.signal, cache: "no-store" });
      if (res.status === 401) {
        o.onUnauthorized();
        return "unauthorized";
      }
      if (res.status === 404) return "not_found";
      if (!res.ok || !res.body) throw new Error(`event stream: ${res.status}`);
      o.onConnected(true);
      failures = 0;
      const parser = new SSEParser();
      const reader = res.body.pipeThrough(new TextDecoderStream()).getReader();
      for (;;) {
        const { value, done } = await reader.read();
        arm();
        if (done) break;
        const msgs = parser.feed(value);
        if (parser.retry !== undefined) retry = parser.retry;
        if (msgs.length > 0) {
          o.onMessages(msgs);
          if (msgs.some((m) => m.event === "end")) {
            ended = true;
            await reader.cancel().catch(() => undefined);
            break;
          }
        }
      }
    } catch {
      if (o.signal.aborted) break;
      failures++;
    } finally {
      clearTimeout(timer);
      o.signal.removeEventListener("abort", stop);
    }
    o.onConnected(false);
    if (ended) return "end";
    if (o.signal.aborted) break;
    await wait(Math.min(retry * Math.max(1, failures), 30000), o.signal);
  }
  return "aborted";
}
