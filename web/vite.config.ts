/// <reference types="vitest/config" />
import { defineConfig } from "vite";
import react from "@vitejs/plugin-react";
import tailwindcss from "@tailwindcss/vite";

// The dev server proxies the API and the probes to a running `maestro serve`
// (MAESTRO_URL, default http://127.0.0.1:7878); `npm run build` writes the app
// that `maestro serve` embeds into ../internal/webui/dist.
const target = process.env.MAESTRO_URL ?? "http://127.0.0.1:7878";
const proxied = ["/api", "/healthz", "/readyz", "/metrics"];

export default defineConfig({
  plugins: [react(), tailwindcss()],
  server: {
    proxy: Object.fromEntries(
      proxied.map((p) => [p, { target, changeOrigin: false }]),
    ),
  },
  build: {
    outDir: "../internal/webui/dist",
    emptyOutDir: true,
    assetsDir: "assets",
    // No inline scripts or styles: the server's CSP allows 'self' only.
    assetsInlineLimit: 0,
    modulePreload: { polyfill: false },
    sourcemap: false,
    target: "es2022",
  },
  test: {
    environment: "jsdom",
    setupFiles: ["./src/test/setup.ts"],
    include: ["src/**/*.test.{ts,tsx}"],
    testTimeout: 20_000,
  },
});
