// The colour theme: the system's by default, or the one the user picked
// (kept in localStorage). The <html> element carries the "dark" class.
export type ThemeChoice = "system" | "light" | "dark";
const key = "maestro.theme";

export function storedTheme(): ThemeChoice {
  const v = localStorage.getItem(key);
  return v === "light" || v === "dark" ? v : "system";
}

export function applyTheme(choice: ThemeChoice): void {
  if (choice === "system") localStorage.removeItem(key);
  else localStorage.setItem(key, choice);
  const dark =
    choice === "dark" ||
    (choice === "system" && typeof matchMedia === "function" && matchMedia("(prefers-color-scheme: dark)").matches);
  document.documentElement.classList.toggle("dark", dark);
}

export function nextTheme(c: ThemeChoice): ThemeChoice {
  return c === "system" ? "light" : c === "light" ? "dark" : "system";
}
