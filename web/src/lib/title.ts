import { useEffect } from "react";

// useTitle names the browser's tab after what the page shows (a task, its
// state): every page was "Maestro", so a user following work in several
// tabs could not tell them apart, nor see from another tab that an agent
// waits for an answer. The title goes back to "Maestro" when the page goes.
export function useTitle(title: string | undefined): void {
  useEffect(() => {
    if (!title) return;
    document.title = `${title} · Maestro`;
  }, [title]);
  useEffect(
    () => () => {
      document.title = "Maestro";
    },
    [],
  );
}
