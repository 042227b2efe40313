import { describe, expect, it } from "vitest";
import { render, screen, waitFor } from "@testing-library/react";
import userEvent from "@testing-library/user-event";
import { QuestionPanel } from "./QuestionPanel";

describe("QuestionPanel", () => {
  it("shows the question and sends the answer", async () => {
    const answers: string[] = [];
    render(<QuestionPanel question="Which colour?" onAnswer={async (a) => void answers.push(a)} />);
    expect(screen.getByTestId("question-text")).toHaveTextContent("Which colour?");
    await userEvent.type(screen.getByLabelText("Your answer"), "Blue.");
    await userEvent.click(screen.getByTestId("answer-submit"));
    await waitFor(() => expect(answers).toEqual(["Blue."]));
    expect(screen.getByTestId("answer-input")).toHaveValue("");
  });

  it("submits with Ctrl-Enter", async () => {
    const answers: string[] = [];
    render(<QuestionPanel question="?" onAnswer={async (a) => void answers.push(a)} />);
    await userEvent.type(screen.getByTestId("answer-input"), "yes{Control>}{Enter}{/Control}");
    await waitFor(() => expect(answers).toEqual(["yes"]));
  });

  it("refuses an empty answer and shows a failed send", async () => {
    let calls = 0;
    render(
      <QuestionPanel
        question="?"
        onAnswer={async () => {
          calls++;
          throw new Error("job 3 is not waiting");
        }}
      />,
    );
    await userEvent.click(screen.getByTestId("answer-submit"));
    expect(screen.getByTestId("form-error")).toHaveTextContent("Write an answer first.");
    expect(calls).toBe(0);
    // The answer box has the focus, to write the answer.
    expect(document.activeElement).toBe(screen.getByTestId("answer-input"));
    await userEvent.type(screen.getByTestId("answer-input"), "x");
    await userEvent.click(screen.getByTestId("answer-submit"));
    await waitFor(() => expect(screen.getByTestId("form-error")).toHaveTextContent("job 3 is not waiting"));
    expect(screen.getByTestId("answer-input")).toHaveValue("x");
    // And to send it again (Sending… had left the focus on <body>).
    expect(document.activeElement).toBe(screen.getByTestId("answer-input"));
  });

  // While it sends, the button keeps the focus (disabled, it dropped it
  // on <body> until the send ended) and a second press sends nothing.
  it("keeps the focus on the button while sending, and sends once", async () => {
    let calls = 0;
    let done: () => void = () => undefined;
    render(
      <QuestionPanel
        question="?"
        onAnswer={() => {
          calls++;
          return new Promise<void>((r) => (done = r));
        }}
      />,
    );
    const user = userEvent.setup();
    await user.type(screen.getByTestId("answer-input"), "yes");
    const button = screen.getByTestId("answer-submit");
    button.focus();
    await user.keyboard("{Enter}");
    expect(button).toHaveTextContent("Sending…");
    expect(button).toHaveAttribute("aria-disabled", "true");
    expect(button).not.toBeDisabled();
    expect(document.activeElement).toBe(button);
    await user.keyboard("{Enter}");
    await user.click(button);
    expect(calls).toBe(1);
    done();
    await waitFor(() => expect(button).toHaveTextContent("Answer and resume"));
    expect(button).not.toHaveAttribute("aria-disabled");
  });
});
