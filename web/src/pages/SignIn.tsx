import { useLayoutEffect, useState, type FormEvent } from "react";
import { useNavigate, useSearchParams } from "react-router";
import { useQueryClient } from "@tanstack/react-query";
import { useApi } from "../api/context";
import { authHeaders, setToken } from "../api/auth";
import { Alert, CheckboxField, InputField } from "../components/Field";

// SignIn asks for the server's access token (shown when the API answers
// 401), checks it against the API and goes back to where the user was.
export function SignIn() {
  const api = useApi();
  const qc = useQueryClient();
  const navigate = useNavigate();
  const [params] = useSearchParams();
  const [token, setTok] = useState("");
  const [remember, setRemember] = useState(false);
  const [error, setError] = useState<string | null>(null);
  const [busy, setBusy] = useState(false);

  // Refused: the token field takes the focus, its text selected to type
  // again.
  useLayoutEffect(() => {
    if (!error || busy) return;
    const el = document.getElementById("signin-token") as HTMLInputElement | null;
    el?.focus();
    el?.select();
  }, [error, busy]);

  const next = params.get("next");
  const target = next && next.startsWith("/") && !next.startsWith("//") ? next : "/";

  async function submit(e: FormEvent) {
    e.preventDefault();
    // Sign in is aria-disabled while it asks, not disabled (that dropped
    // its focus on <body>): a second press does nothing.
    if (busy) return;
    setError(null);
    const t = token.trim();
    if (!t) {
      setError("Enter the server's access token.");
      return;
    }
    setBusy(true);
    try {
      const f = api.opts.fetch ?? fetch;
      const res = await f(
        new Request(new URL("/api/v1/tasks?limit=1", api.opts.baseUrl || window.location.origin), {
          headers: authHeaders(t),
        }),
      );
      if (res.status === 401) {
        setError("The server refused this token.");
        return;
      }
      if (!res.ok) {
        setError(`The server answered ${res.status}.`);
        return;
      }
      setToken(t, remember);
      await qc.invalidateQueries();
      navigate(target, { replace: true });
    } catch (err) {
      setError(`Could not reach the server: ${err instanceof Error ? err.message : String(err)}`);
    } finally {
      setBusy(false);
    }
  }

  return (
    <form onSubmit={submit} className="card mx-auto mt-8 max-w-sm space-y-3" aria-labelledby="signin-h">
      <h1 id="signin-h" className="text-lg font-semibold">
        Sign in
      </h1>
      <p className="text-sm text-slate-600 dark:text-slate-400">This server needs its access token.</p>
      <InputField id="signin-token" label="Access token" type="password" autoComplete="current-password" value={token} onChange={setTok} />
      <CheckboxField id="signin-remember" label="Remember on this device" checked={remember} onChange={setRemember} />
      {error && <Alert testId="signin-error">{error}</Alert>}
      <button type="submit" className="btn btn-primary" data-testid="signin-submit" aria-disabled={busy || undefined}>
        Sign in
      </button>
    </form>
  );
}
