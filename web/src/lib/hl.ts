// The code highlighter: lowlight (highlight.js grammars, rendered as a
// hast tree, so no HTML string is injected) with the languages agents
// write most. It is a chunk of its own, imported by highlight.tsx only
// when a code block is on screen, so the first load of / does not carry it.
import { createLowlight } from "lowlight";
import type { Root } from "hast";
import bash from "highlight.js/lib/languages/bash";
import css from "highlight.js/lib/languages/css";
import diff from "highlight.js/lib/languages/diff";
import go from "highlight.js/lib/languages/go";
import javascript from "highlight.js/lib/languages/javascript";
import json from "highlight.js/lib/languages/json";
import markdown from "highlight.js/lib/languages/markdown";
import python from "highlight.js/lib/languages/python";
import rust from "highlight.js/lib/languages/rust";
import sql from "highlight.js/lib/languages/sql";
import typescript from "highlight.js/lib/languages/typescript";
import xml from "highlight.js/lib/languages/xml";
import yaml from "highlight.js/lib/languages/yaml";

const lowlight = createLowlight({ bash, css, diff, go, javascript, json, markdown, python, rust, sql, typescript, xml, yaml });
lowlight.registerAlias({ bash: ["sh", "shell", "zsh", "console"], javascript: ["js", "jsx"], typescript: ["ts", "tsx"], xml: ["html", "svg"], yaml: ["yml"], python: ["py"], markdown: ["md"], rust: ["rs"] });

// Blocks longer than this are shown plain: highlighting a huge tool output
// would block the main thread.
const maxChars = 50_000;

// highlightTree highlights src as lang (a fence's language), or guesses
// among the registered languages when lang is empty; null leaves it plain
// (an unknown language, a block too large, nothing recognised).
export function highlightTree(src: string, lang: string | undefined): Root | null {
  if (src.length > maxChars) return null;
  if (lang) return lowlight.registered(lang) ? lowlight.highlight(lang, src) : null;
  const auto = lowlight.highlightAuto(src);
  return auto.data?.relevance && auto.data.relevance >= 5 ? auto : null;
}
