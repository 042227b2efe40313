//go:build browser

package e2e

import (
	"strings"
	"testing"
)

// TestBusyButtonHover: a button busy with its own request is
// aria-disabled (it keeps the focus); under the mouse it must look as it
// does without it, as a disabled one does, where it darkened as if it
// could be pressed. Headless Chromium has no hovering pointer, so
// Tailwind's hover rules (inside @media (hover: hover)) never apply there:
// the test asks the page's style sheets which :hover rules that set a
// background would match the button once hovered. A free button of each
// kind has such a rule, so the check tells "no hover rule" from "no rule
// read". A disabled button is checked alike, and a link styled as a
// button (never :disabled) keeps its hover.
func TestBusyButtonHover(t *testing.T) {
	s := startServe(t, nil, "--workers", "0")
	tb := newTab(t, s.url)
	tb.open("/usage", "usage-from")
	for _, kind := range []string{"btn", "btn btn-primary", "btn btn-danger"} {
		for _, el := range []string{
			`<button class="` + kind + `">`,
			`<button class="` + kind + `" aria-disabled="true">`,
			`<button class="` + kind + `" disabled>`,
			`<a class="` + kind + `" href="#">`,
		} {
			busy := strings.Contains(el, "disabled")
			got := eval[[]string](tb, "the hover rules of "+el, `(() => {
				document.getElementById("hover-probe")?.remove();
				document.body.insertAdjacentHTML("afterbegin", '`+strings.Replace(el, ">", ` id="hover-probe">`, 1)+`probe</`+el[1:strings.IndexByte(el, ' ')]+`>');
				const probe = document.getElementById("hover-probe");
				const found = [];
				const walk = (rules) => {
					for (const r of rules) {
						if (r.cssRules && !(r instanceof CSSStyleRule)) { walk(r.cssRules); continue; }
						if (!(r instanceof CSSStyleRule) || !r.selectorText.includes(":hover")) continue;
						if (!r.style.backgroundColor && !r.style.getPropertyValue("background-color")) continue;
						for (const sel of r.selectorText.split(",")) {
							if (!sel.includes(":hover")) continue;
							try { if (probe.matches(sel.replaceAll(":hover", ""))) found.push(r.selectorText); } catch (e) {}
						}
					}
				};
				for (const sheet of document.styleSheets) walk(sheet.cssRules);
				probe.remove();
				return found;
			})()`)
			switch {
			case busy && len(got) > 0:
				t.Errorf("%s: under the mouse these rules would change its background: %q; want none", el, got)
			case !busy && len(got) == 0:
				t.Errorf("%s: no :hover rule sets its background; want one (were the style sheets read?)", el)
			}
		}
	}
}
