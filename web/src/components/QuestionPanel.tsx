import { useLayoutEffect, useState, type FormEvent } from "react";
import { Alert, TextAreaField } from "./Field";

// QuestionPanel shows the question a waiting job (waiting_human) asked and
// takes the answer; answering posts a comment, which queues the job again
// (docs/api.md, "Questions (ASK)").
export function QuestionPanel({
  question,
  onAnswer,
}: {
  question: string;
  onAnswer: (answer: string) => Promise<void>;
}) {
  const [answer, setAnswer] = useState("");
  const [error, setError] = useState<string | null>(null);
  const [busy, setBusy] = useState(false);
  // An empty or refused answer: the answer box takes the focus, to write
  // or send again. While it sends, the button is aria-disabled, not
  // disabled: a disabled one dropped the focus on <body>; submit does
  // nothing while busy.
  useLayoutEffect(() => {
    if (error && !busy) document.getElementById("answer-input")?.focus();
  }, [error, busy]);

  async function submit(e?: FormEvent) {
    e?.preventDefault();
    if (!answer.trim() || busy) {
      if (!answer.trim()) setError("Write an answer first.");
      return;
    }
    setBusy(true);
    setError(null);
    try {
      await onAnswer(answer);
      setAnswer("");
    } catch (err) {
      setError(err instanceof Error ? err.message : String(err));
    } finally {
      setBusy(false);
    }
  }

  return (
    <section
      data-testid="question-panel"
      aria-labelledby="question-h"
      className="rounded-lg border-2 border-amber-400 bg-amber-50 p-4 dark:border-amber-600 dark:bg-amber-950"
    >
      <h2 id="question-h" className="text-sm font-semibold">
        The agent is waiting for you
      </h2>
      <p data-testid="question-text" className="bidi-auto my-2 whitespace-pre-wrap wrap-anywhere">
        {question}
      </p>
      <form onSubmit={submit} className="space-y-2">
        <TextAreaField
          id="answer-input"
          label="Your answer"
          className="min-h-20"
          value={answer}
          onChange={setAnswer}
          onKeyDown={(e) => {
            if (e.key === "Enter" && (e.metaKey || e.ctrlKey)) {
              e.preventDefault();
              void submit();
            }
          }}
        />
        {error && <Alert>{error}</Alert>}
        <button type="submit" className="btn btn-primary" data-testid="answer-submit" aria-disabled={busy || undefined}>
          {busy ? "Sending…" : "Answer and resume"}
        </button>
      </form>
    </section>
  );
}
