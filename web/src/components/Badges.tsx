import { stateClass, stateLabel } from "../lib/format";

export function StatusBadge({ state, testId }: { state: string | undefined; testId?: string }) {
  return (
    <span className={`badge ${stateClass(state)}`} data-testid={testId} data-status={state ?? ""}>
      {stateLabel(state)}
    </span>
  );
}

export function ExecutorBadge({ executor }: { executor: string }) {
  const replay = executor === "REPLAY";
  return (
    <span
      data-testid="executor-badge"
      title={replay ? "Scripted replay: no model is called" : `Executor: ${executor}`}
      className={`badge ${
        replay
          ? "bg-fuchsia-700 text-white dark:bg-fuchsia-600"
          : "bg-slate-200 text-slate-800 dark:bg-slate-700 dark:text-slate-100"
      }`}
    >
      {replay ? "▶ REPLAY" : executor}
    </span>
  );
}
