// One chat message on screen: the user's text, or a reply with its Thinking accordion,
// the reply (sanitised Markdown) and the expandable "retrieve N hits" row.
import { h, externalLink } from "./dom.js";
import { linkCitations } from "./citations.js";
import { renderMarkdown } from "./markdown.js";
import { MEMORY_VERDICT } from "./wire.js";

export function userMessage(text, id) {
  return h(
    "article",
    { class: "msg user", "data-id": id, "aria-label": "You said" },
    h("div", { class: "who", text: "you" }),
    h("div", { class: "body plain", text }),
  );
}

export class ReplyView {
  constructor(id) {
    this.thinkingText = "";
    this.text = "";
    this.thinkingStarted = null;
    this.thinkingSeconds = null;
    this.paintQueued = false;
    this.final = false; // finish() painted the stored text, with its citation links
    this.created = performance.now();
    this.thinking = h("details", { class: "thinking", hidden: true });
    this.thinkingLabel = h("summary", { text: "Thinking" });
    this.thinkingBody = h("div", { class: "thinking-body" });
    this.thinking.append(this.thinkingLabel, this.thinkingBody);
    this.body = h("div", { class: "body markdown" });
    this.hits = h("div", { class: "hits-slot" });
    this.actions = h("div", { class: "actions" });
    this.el = h(
      "article",
      { class: "msg assistant", "data-id": id || "", "aria-label": "Steelframe replied" },
      h("div", { class: "who", text: "steelframe" }),
      this.thinking,
      this.body,
      this.hits,
      this.actions,
    );
  }

  addThinking(text) {
    // Timed from when the reply was asked for: reasoning frames may arrive in one burst
    // after the model thought for seconds, and the gap between frames is not the thinking.
    if (this.thinkingStarted === null) this.thinkingStarted = this.created;
    this.thinkingText += text;
    this.thinking.hidden = false;
    this.thinking.open = true;
    this.thinkingLabel.classList.add("shimmer");
    this.thinkingLabel.textContent = "Thinking…";
    this.thinkingBody.textContent = this.thinkingText;
  }

  collapseThinking() {
    if (this.thinkingStarted !== null && this.thinkingSeconds === null) {
      const seconds = (performance.now() - this.thinkingStarted) / 1000;
      this.thinkingSeconds =
        seconds < 1 ? "under 1" : seconds < 10 ? seconds.toFixed(1) : String(Math.round(seconds));
    }
    this.thinkingLabel.classList.remove("shimmer");
    this.thinking.open = false;
    // A stored reply has no timing: "Thoughts", not a "Thinking" that reads as in progress.
    this.thinkingLabel.textContent =
      this.thinkingSeconds === null ? "Thoughts" : `Thought for ${this.thinkingSeconds} s`;
  }

  addDelta(text, replace) {
    if (this.final) return;
    if (this.thinking.open) this.collapseThinking();
    // A grounded second draft replaces the first: never concatenate drafts.
    this.text = replace ? text : this.text + text;
    this.el.classList.toggle("redraft", Boolean(replace) || this.el.classList.contains("redraft"));
    this.paintSoon();
  }

  paintSoon() {
    if (this.paintQueued) return;
    this.paintQueued = true;
    // One paint per frame, however many tokens arrived: the first lands in the next frame.
    requestAnimationFrame(() => {
      this.paintQueued = false;
      // A paint queued before finish() must not repaint over the final text (its links).
      if (!this.final) renderMarkdown(this.body, this.text);
    });
  }

  finish(message) {
    this.final = true;
    this.el.dataset.id = message.id || this.el.dataset.id;
    this.text = message.content || "";
    renderMarkdown(this.body, this.text);
    linkCitations(this.body);
    const reasoning = message.reasoning || "";
    if (reasoning) {
      this.thinkingText = reasoning;
      this.thinkingBody.textContent = reasoning;
      this.thinking.hidden = false;
    }
    this.collapseThinking();
    this.setHits(message.retrieved || [], message.retrieveHits, message.memoryVerdict);
  }

  setHits(hits, count, verdict) {
    this.hits.replaceChildren();
    if (!hits.length) return;
    const n = count ?? hits.length;
    // Best first: the order the operator reads them in.
    const ranked = [...hits].sort((a, b) => (b.score ?? -Infinity) - (a.score ?? -Infinity));
    const list = h("ul", { class: "hit-list" }, ranked.map(hitItem));
    this.hits.append(h("details", { class: "hits" }, h("summary", { text: hitsTitle(n, hits.length, verdict) }), list));
  }

  stopped(reasonText) {
    this.final = true;
    this.collapseThinking();
    this.text = "";
    this.body.replaceChildren(h("p", { class: "note", text: reasonText }));
    this.el.classList.add("stopped");
  }
}

// As the TUI's row reads it (tui_client/transcript.py, hits_title): with no semantic hits the
// list holds recent session summaries (the spec's recency fallback), and the row says so
// rather than "0 hits" over a list; when memory has nothing that answers the question, the
// hits are the closest it has, not an answer (docs/memory.md).
function hitsTitle(n, listed, verdict) {
  const title = `retrieve ${n} ${n === 1 ? "hit" : "hits"}`;
  if (n === 0 && listed) return `${title} · (no semantic hits) ${listed} recent ${listed === 1 ? "summary" : "summaries"}`;
  return verdict === MEMORY_VERDICT.NOTHING && n ? `${title} · nothing answers this: closest, not an answer` : title;
}

function hitItem(hit) {
  const parts = [];
  parts.push(h("span", { class: "hit-source", text: hit.source || "memory" }));
  if (typeof hit.score === "number") parts.push(h("span", { class: "hit-score", text: hit.score.toFixed(2) }));
  if (hit.issue) {
    const link = hit.url || hit.issue_url;
    parts.push(link ? externalLink(link, `#${hit.issue}`) : h("span", { text: `#${hit.issue}` }));
  }
  if (hit.pr) parts.push(h("span", { text: `PR #${hit.pr}` }));
  if (hit.session_id) parts.push(h("span", { class: "hit-session", text: `session ${hit.session_id}` }));
  const paths = Array.isArray(hit.paths) && hit.paths.length ? hit.paths.join(", ") : "";
  return h(
    "li",
    { class: "hit" },
    h("div", { class: "hit-meta" }, parts),
    paths ? h("div", { class: "hit-paths", text: paths }) : null,
    h("div", { class: "hit-preview", text: hit.preview || hit.text || "" }),
  );
}

export function renderStored(message) {
  if (message.role === "user") return userMessage(message.content, message.id);
  const view = new ReplyView(message.id);
  view.finish({
    id: message.id,
    content: message.content,
    reasoning: message.reasoning,
    retrieved: message.meta?.retrieved || [],
    retrieveHits: message.meta?.retrieve_hits,
    memoryVerdict: message.meta?.memory_verdict,
  });
  return view.el;
}
