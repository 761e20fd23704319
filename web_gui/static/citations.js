// Clickable citations in replies: a session id opens that session, `#N` opens the run of
// issue N when the Board knows it. Built from text nodes, so nothing here parses markup.
import { h } from "./dom.js";

const PATTERN = /\b([0-9a-f]{32})\b|(^|[^\w&])#(\d{1,9})\b/g;
const SKIP = new Set(["A", "CODE", "PRE", "BUTTON"]);
let handler = { session: null, issue: null, knowsIssue: () => false };

export function setCitationHandler(next) {
  handler = next;
}

export function linkCitations(root) {
  const walker = document.createTreeWalker(root, NodeFilter.SHOW_TEXT, {
    acceptNode(node) {
      for (let el = node.parentElement; el && el !== root; el = el.parentElement) {
        if (SKIP.has(el.tagName)) return NodeFilter.FILTER_REJECT;
      }
      return NodeFilter.FILTER_ACCEPT;
    },
  });
  const nodes = [];
  while (walker.nextNode()) nodes.push(walker.currentNode);
  for (const node of nodes) replaceIn(node);
}

function replaceIn(node) {
  const text = node.textContent;
  PATTERN.lastIndex = 0;
  if (!PATTERN.test(text)) return;
  PATTERN.lastIndex = 0;
  const parts = [];
  let last = 0;
  for (const match of text.matchAll(PATTERN)) {
    const [whole, session, lead = "", issue] = match;
    const start = match.index + (session ? 0 : lead.length);
    if (issue && !handler.knowsIssue(Number(issue))) continue;
    parts.push(text.slice(last, start));
    parts.push(
      session
        ? h("button", { class: "cite link", title: "Open this session", onclick: () => handler.session?.(session) }, session.slice(0, 8))
        : h("button", { class: "cite link", title: "Open this run", onclick: () => handler.issue?.(Number(issue)) }, `#${issue}`),
    );
    last = match.index + whole.length;
  }
  if (!parts.length) return;
  parts.push(text.slice(last));
  node.replaceWith(...parts);
}
