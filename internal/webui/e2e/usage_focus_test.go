//go:build browser

package e2e

import (
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"
)

// TestUsageDateFocusRing: Shift+Tab back from Group by through the usage
// page's To and From date fields; at each of their stops (the day, month
// and year, and the calendar button) the field shows the focus ring. With the calendar
// button focused (inside the field's shadow root, where the field matches
// :focus-within but not :focus-visible) it showed none. The screenshots
// are taken with the first calendar button focused.
func TestUsageDateFocusRing(t *testing.T) {
	s := startServe(t, nil, "--workers", "0")
	tb := newTab(t, s.url)
	tb.open("/usage", "usage-from")
	eval[chromedp.Void](tb, "focus the grouping", q("usage-group")+`.focus()`)
	var stops []string
	calendar := 0
	for i := 0; i < 12; i++ {
		tb.run("Shift+Tab", chromedp.KeyEvent(kb.Tab, chromedp.KeyModifiers(chromedp.ModifierShift)))
		got := eval[string](tb, "the focused control", `(() => {
			const a = document.activeElement;
			if (a.type !== "date") return "";
			const c = getComputedStyle(a);
			return a.id + (a.matches(":focus") ? "" : " (calendar button)") + ": " + c.outlineStyle + " " + c.outlineWidth;
		})()`)
		if got == "" {
			if len(stops) > 0 {
				break
			}
			continue
		}
		stops = append(stops, got)
		if strings.Contains(got, "calendar button") {
			if calendar++; calendar == 1 {
				tb.shots("usage-calendar-focus")
			}
		}
		if !strings.HasSuffix(got, ": solid 2px") {
			t.Errorf("Shift+Tab stop %s: want the app's focus ring (solid 2px)", got)
		}
	}
	if calendar == 0 {
		t.Errorf("Shift+Tab never reached a date field's calendar button; stops: %q", stops)
	}
	t.Logf("stops: %q", stops)
}
