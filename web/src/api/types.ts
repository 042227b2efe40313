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

// ServerInfo is GET /api/v1/server: version, store, workers, queue depth.
export type ServerInfo = components["schemas"]["ServerInfo"];
