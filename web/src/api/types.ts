import type { components } from "./schema";

export type Task = components["schemas"]["Task"];
export type Job = components["schemas"]["Job"];
export type JobEvent = components["schemas"]["JobEvent"];
export type Comment = components["schemas"]["Comment"];
export type Schedule = components["schemas"]["Schedule"];
export type PieceSummary = components["schemas"]["PieceSummary"];
export type State = components["schemas"]["State"];
export type ApiErrorBody = components["schemas"]["Error"];

export const states: State[] = [
  "queued",
  "dispatching",
  "running",
  "waiting_human",
  "waiting_subtasks",
  "succeeded",
  "failed",
  "aborted",
  "cancelled",
];

export const finishedStates: ReadonlySet<string> = new Set(["succeeded", "failed", "aborted", "cancelled"]);

// TODO(W2 openapi entry): GET /api/v1/server is added to docs/openapi.yaml by
// the web-serving part (docs/spec dom contract); until that is merged this is
// the one hand-written API type. Replace it with
// components["schemas"]["ServerInfo"] (or whatever name the entry gets) after
// `npm run gen:api`.
export interface ServerInfo {
  version?: string;
  store?: "sqlite" | "postgres" | string;
  started_at?: string;
  executor_default?: string;
  workers?: { id: string; host?: string; running_jobs?: number[]; last_seen?: string }[];
  queue?: Record<string, number>;
}
