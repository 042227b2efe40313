import { describe, expect, it } from "vitest";
import { render, screen, waitFor } from "@testing-library/react";
import userEvent from "@testing-library/user-event";
import { SignIn } from "./SignIn";
import { json, Wrap } from "../test/helpers";

// While it asks, Sign in keeps the focus (disabled, it dropped it on
// <body> until the server answered) and a second press asks nothing.
describe("SignIn", () => {
  it("keeps the focus on Sign in while it asks, and asks once", async () => {
    let asks = 0;
    let answer: (r: Response) => void = () => undefined;
    const f = (() => {
      asks++;
      return new Promise<Response>((r) => (answer = r));
    }) as typeof fetch;
    render(
      <Wrap fetch={f} path="/signin">
        <SignIn />
      </Wrap>,
    );
    const user = userEvent.setup();
    await user.type(screen.getByLabelText("Access token"), "wrong");
    const button = screen.getByTestId("signin-submit");
    button.focus();
    await user.keyboard("{Enter}");
    expect(asks).toBe(1);
    expect(button).toHaveAttribute("aria-disabled", "true");
    expect(button).not.toBeDisabled();
    expect(document.activeElement).toBe(button);
    await user.keyboard("{Enter}");
    await user.click(button);
    expect(asks).toBe(1);
    answer(json({ error: "unauthorized" }, 401));
    expect(await screen.findByTestId("signin-error")).toHaveTextContent("refused");
    await waitFor(() => expect(button).not.toHaveAttribute("aria-disabled"));
    expect(document.activeElement).toBe(screen.getByTestId("signin-token"));
  });
});
