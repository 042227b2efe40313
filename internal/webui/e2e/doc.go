// Package e2e holds the web UI's end-to-end tests: the built `maestro`
// binary runs `maestro serve` on replay in a temporary home, and Debian's
// headless Chromium, driven over the DevTools protocol (chromedp), uses the
// app as a person would, by the data-testid hooks of the DOM contract
// (docs/web-ui.md). Each scenario saves screenshots (desktop 1280×800 and
// 390×844) under $MAESTRO_TEST_ARTIFACTS, scans each page with axe-core
// (no serious or critical violation), and logs the measured budgets.
//
// The tests carry the build tag browser: scripts/test-web.sh runs them
// (after npm ci in web/, which provides axe-core) with
// `go test -tags browser ./internal/webui/e2e/`. Without chromium they
// skip loudly, or fail under CI=true.
package e2e
