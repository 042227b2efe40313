// The bearer token the API needs when the server has one (docs/api.md,
// "Authentication"). It lives in sessionStorage, or in localStorage when the
// user ticked "Remember on this device".
const key = "maestro.token";

export function getToken(): string | null {
  return sessionStorage.getItem(key) ?? localStorage.getItem(key);
}

export function setToken(token: string, remember: boolean): void {
  clearToken();
  (remember ? localStorage : sessionStorage).setItem(key, token);
}

export function clearToken(): void {
  sessionStorage.removeItem(key);
  localStorage.removeItem(key);
}

export function authHeaders(token: string | null = getToken()): Record<string, string> {
  return token ? { Authorization: `Bearer ${token}` } : {};
}
