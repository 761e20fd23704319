// Best-effort Markdown for untrusted text (model replies, previews): marked renders,
// DOMPurify removes anything that could run (script, event handlers, javascript: URLs).
import { marked } from "./vendor/marked.esm.js";
import DOMPurify from "./vendor/purify.es.mjs";

marked.setOptions({ gfm: true, breaks: true, async: false });

DOMPurify.addHook("afterSanitizeAttributes", (node) => {
  if (node.tagName === "A") {
    const href = node.getAttribute("href") || "";
    if (!/^https?:\/\//i.test(href) && !href.startsWith("#")) node.removeAttribute("href");
    node.setAttribute("target", "_blank");
    node.setAttribute("rel", "noopener noreferrer");
  }
  if (node.tagName === "IMG") node.remove(); // no remote images: they leak that a page was read
});

const PURIFY = {
  FORBID_TAGS: ["style", "form", "input", "button", "textarea", "select", "iframe", "svg", "math"],
  FORBID_ATTR: ["style", "class", "id"],
  RETURN_DOM_FRAGMENT: true,
};

export function renderMarkdown(target, text) {
  const html = marked.parse(String(text ?? ""));
  const fragment = DOMPurify.sanitize(html, PURIFY);
  target.replaceChildren(fragment);
}
