import { useCallback, useEffect, useRef, useState } from "react";
import { useApi } from "../api/context";
import { ApiError } from "../api/client";
import type { JobLogView } from "./useJobLog";
import type { LogModel } from "./eventlog";
import { pendingHistoryKey } from "./agents";
import { headless, LiveModel, streamEnvelopes, uploadAttachment, type PendingRequest, type Role, type Snapshot, type Subscription } from "./live";

export type LinkState = "subscribing" | "live" | "reconnecting" | "lease_held" | "ended" | "failed";

export interface LiveView {
  link: LinkState;
  error: string | undefined;
  sub: Subscription | undefined;
  log: JobLogView;
  pending: PendingRequest[];
  resets: { reason: string; cursor: number }[];
  // usage sums the usage of every response_end applied (a reset's missed
  // frames are not in it).
  usage: LogModel["usage"];
  snapshot: Snapshot | undefined;
  // controller is true while this client holds the controller lease.
  controller: boolean;
  responding: boolean;
  // files are the answers of the utility operations (by their ids).
  utility: Record<string, Record<string, unknown>>;
}

// What a controller negotiates: every request the dialogs answer and the
// utility operations of the file panel.
const controllerCaps = { serverRequests: ["approval", "user_input", "tool_retry"], utilityOperations: ["file_search", "file_read"] };

// useLiveSession subscribes to a live session as role, follows its event
// stream (resuming from the last applied cursor after a drop, subscribing
// again when the subscription is gone) and sends messages as that
// subscription. takeControl subscribes again with takeControl:true.
export function useLiveSession(sessionId: string, role: Role) {
  const api = useApi();
  const model = useRef(new LiveModel());
  const subRef = useRef<Subscription | undefined>(undefined);
  const [link, setLink] = useState<LinkState>("subscribing");
  const [error, setError] = useState<string>();
  const [, setTick] = useState(0);
  const [take, setTake] = useState(0);
  const utility = useRef<Record<string, Record<string, unknown>>>({});
  const rerender = useCallback(() => setTick((n) => n + 1), []);

  useEffect(() => {
    const ac = new AbortController();
    model.current = new LiveModel();
    subRef.current = undefined;
    const subscribe = async (takeControl: boolean): Promise<boolean> => {
      setLink("subscribing");
      try {
        const body: Record<string, unknown> = { role, clientInfo: { name: "maestro-web" } };
        if (role === "controller") body.capabilities = controllerCaps;
        if (takeControl) body.takeControl = true;
        const sub = await headless<Subscription>(api, "POST", `/api/headless/sessions/${encodeURIComponent(sessionId)}/subscribe`, body);
        subRef.current = sub;
        model.current.resubscribed(sub.snapshot);
        model.current.controllerConnectionId = sub.controller_connection_id;
        setError(undefined);
        rerender();
        return true;
      } catch (e) {
        if (e instanceof ApiError && e.status === 409) setLink("lease_held");
        else if (e instanceof ApiError && e.status === 404) setLink("ended");
        else setLink("failed");
        setError(e instanceof Error ? e.message : String(e));
        return false;
      }
    };
    const run = async () => {
      if (!(await subscribe(take > 0))) return;
      // A stored session continued here (Agents page) seeds the
      // conversation with its history once, as the controller.
      const key = pendingHistoryKey(sessionId);
      const history = sessionStorage.getItem(key);
      if (history && role === "controller") {
        sessionStorage.removeItem(key);
        await headless(api, "POST", `/api/headless/sessions/${encodeURIComponent(sessionId)}/messages`, { type: "init", history: JSON.parse(history) }, {
          "x-maestro-headless-subscriber-id": subRef.current!.subscription_id,
        }).catch((e: unknown) => setError(e instanceof Error ? e.message : String(e)));
      }
      let failures = 0;
      while (!ac.signal.aborted) {
        const sub = subRef.current!;
        const q = new URLSearchParams({ subscriptionId: sub.subscription_id });
        q.set("cursor", String(model.current.cursor));
        const status = await streamEnvelopes(api, sessionId, q.toString(), ac.signal, () => {
          failures = 0;
          setLink("live");
        }, (env) => {
          const m = env.message as Record<string, unknown> | undefined;
          const t = typeof m?.type === "string" ? m.type : "";
          if (m && (t === "utility_file_search_results" || t === "utility_file_read_result" || (t === "error" && typeof m.request_id === "string"))) {
            const id = (m.search_id ?? m.read_id ?? m.request_id) as string;
            utility.current = { ...utility.current, [id]: m };
          }
          model.current.apply(env);
          rerender();
        });
        if (ac.signal.aborted) break;
        // 404: the session is gone, or our subscription expired; 410: it
        // ended (its serve stopped: after a restart the stream answered
        // 410 stale_session, taken for a drop, and the page said
        // "reconnecting…" for ever, the prompt box open). Ask the session:
        // gone or ended says so; alive, subscribe again.
        if (status === 404 || status === 410) {
          let gone: unknown;
          try {
            await headless(api, "GET", `/api/headless/sessions/${encodeURIComponent(sessionId)}`);
          } catch (e) {
            gone = e;
          }
          if (gone === undefined) {
            if (!(await subscribe(false))) return;
            continue;
          }
          // No answer at all (the server stopped in between) is a drop.
          if (gone instanceof ApiError && (gone.status === 404 || gone.status === 410)) {
            setError(gone.message);
            setLink("ended");
            return;
          }
        }
        setLink("reconnecting");
        failures++;
        await new Promise<void>((resolve) => {
          const t = setTimeout(resolve, Math.min(1000 * failures, 10000));
          ac.signal.addEventListener("abort", () => {
            clearTimeout(t);
            resolve();
          });
        });
      }
    };
    void run();
    return () => {
      ac.abort();
      const sub = subRef.current;
      if (sub) {
        void headless(api, "POST", `/api/headless/sessions/${encodeURIComponent(sessionId)}/disconnect`, { subscriptionId: sub.subscription_id }).catch(() => undefined);
      }
    };
  }, [api, sessionId, role, take, rerender]);

  const send = useCallback(
    async (msg: Record<string, unknown>) => {
      const sub = subRef.current;
      if (!sub) throw new Error("not subscribed");
      return headless(api, "POST", `/api/headless/sessions/${encodeURIComponent(sessionId)}/messages`, msg, {
        "x-maestro-headless-subscriber-id": sub.subscription_id,
      });
    },
    [api, sessionId],
  );

  const upload = useCallback(
    async (file: File) => {
      const sub = subRef.current;
      if (!sub) throw new Error("not subscribed");
      return uploadAttachment(api, sessionId, sub.subscription_id, file);
    },
    [api, sessionId],
  );

  const m = model.current;
  const sub = subRef.current;
  const view: LiveView = {
    link,
    error,
    sub,
    log: {
      items: m.log.items,
      movements: m.log.movements,
      totalCost: m.log.totalCost,
      executor: m.log.executor,
      model: m.log.model,
      count: m.count,
      lastId: m.cursor,
      gaps: m.resets.length,
      dupes: m.dupes,
      connected: link === "live",
      ended: link === "ended" ? { state: "ended", last_seq: m.cursor } : undefined,
    },
    pending: m.pending,
    resets: m.resets,
    usage: m.log.usage,
    snapshot: m.snapshot,
    // An ended session has no controller: its lease went with it.
    controller: link !== "ended" && sub !== undefined && sub.role === "controller" && m.controllerConnectionId === sub.connection_id,
    responding: m.responding,
    utility: utility.current,
  };
  return { view, send, upload, takeControl: () => setTake((n) => n + 1) };
}
