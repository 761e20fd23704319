// The Chat surface: sessions sidebar, header (agent, focus), messages, status line, the
// Publish bar and the composer. Turns stream over SSE and resume after a dropped connection.
import { api, ApiError, newKey, openStream, readSse } from "./api.js";
import { linkCitations } from "./citations.js";
import { $, h, clear, show, externalLink, loadFailed } from "./dom.js";
import { ReplyView, renderStored, userMessage } from "./messages.js";
import { notify } from "./notify.js";
import { offerPanel } from "./offers.js";
import { isEmptyChat, renderSidebar } from "./sidebar.js";
import { ERROR_REASON, FRAME, STATUS_REASON } from "./wire.js";

const PAGE = 100; // messages painted at a time; older ones on "Show earlier messages"
const RESUME_TRIES = 5;

export class Chat {
  constructor(app) {
    this.app = app;
    this.sessions = [];
    this.session = null; // the open session (with messages)
    this.focus = null;
    this.focusChanged = false; // send focus with the next message
    this.agent = null;
    this.agentChanged = false;
    this.decision = null; // {body, issue}
    // What a chat held unsent before a reload (keepDraft): {focus, agent, decision}, each
    // {session, ...} or null, applied when that chat opens again (load).
    this.kept = null;
    this.lost = null; // {session, shown}: a turn lost with the connection (reconnected)
    this.turn = null; // {session, turnId, lastId, view, done}
    this.sends = 0; // messages sent from this page: sign-in's first render must not wipe them
    this.unseen = new Set();
    this.rendered = new Set();
    this.hiddenOlder = [];
    // What the conversation shows follows the operator's latest action: an open (or a new
    // chat) still loading when they send, or open another chat, must not paint over it.
    this.shown = 0;
    // Sidebar loads asked, and the newest one whose answer is shown (`loadSessions`).
    this.listsAsked = 0;
    this.listShown = 0;
    this.els = {
      list: $("#session-list"),
      messages: $("#messages"),
      status: $("#status-line"),
      composer: $("#composer"),
      input: $("#message"),
      send: $("#send"),
      stop: $("#stop"),
      publishBar: $("#publish-bar"),
      publishLabel: $("#publish-label"),
      publishText: $("#decision-text"),
      publishButton: $("#publish"),
      approvePlan: $("#approve-plan"),
      focusChip: $("#focus-chip"),
      focusText: $("#focus-text"),
      focusForm: $("#focus-form"),
      focusInput: $("#focus-input"),
      agent: $("#agent-select"),
      title: $("#chat-title"),
      jump: $("#jump-latest"),
    };
    this.pinned = true; // the operator is at the bottom: new content keeps them there
    this.bind();
    this.followConversation();
  }

  // Pinned to the bottom while the operator is at the bottom; once they scroll up, new
  // content leaves them where they are and "Jump to latest" offers the way back, from the
  // moment they leave the bottom (not only once something new arrives).
  followConversation() {
    const box = this.els.messages;
    box.addEventListener("scroll", () => {
      this.pinned = box.scrollHeight - box.scrollTop - box.clientHeight < 48;
      show(this.els.jump, !this.pinned);
    });
    const onChange = () => {
      if (this.pinned) box.scrollTop = box.scrollHeight;
      else show(this.els.jump, box.scrollHeight - box.scrollTop - box.clientHeight >= 48);
    };
    new MutationObserver(onChange).observe(box, { childList: true, subtree: true, characterData: true, attributes: true });
    new ResizeObserver(onChange).observe(box);
    this.els.jump.addEventListener("click", () => this.toLatest());
  }

  toLatest() {
    this.pinned = true;
    show(this.els.jump, false);
    this.els.messages.scrollTop = this.els.messages.scrollHeight;
  }

  bind() {
    const e = this.els;
    e.composer.addEventListener("submit", (ev) => {
      ev.preventDefault();
      this.send();
    });
    e.input.addEventListener("keydown", (ev) => {
      if (ev.key === "Enter" && !ev.shiftKey && !ev.isComposing) {
        ev.preventDefault();
        this.send();
      }
    });
    e.stop.addEventListener("click", () => this.stop());
    $("#new-chat").addEventListener("click", () => this.newChat());
    $("#focus-clear").addEventListener("click", () => this.setFocus(null));
    e.focusForm.addEventListener("submit", (ev) => {
      ev.preventDefault();
      const n = Number(e.focusInput.value);
      if (Number.isInteger(n) && n > 0) {
        this.setFocus(n);
        e.focusInput.value = "";
      } else notify("Focus needs an issue or PR number, e.g. 42", { level: "error" });
    });
    e.agent.addEventListener("change", () => this.switchAgent(e.agent.value));
    e.publishBar.addEventListener("submit", (ev) => {
      ev.preventDefault();
      this.publish();
    });
    // A plan-first task's plan approved as written (docs/lifecycle.md, "Plan-first runs").
    e.approvePlan.addEventListener("click", () => this.publish("Approve plan"));
  }

  // What the operator was typing survives a reload of the tab (sessionStorage: this tab
  // only, keyed by operator, so another operator signing in here never sees it), and so do
  // a focus and an agent switch set for the next message and not sent yet (the kept words
  // would go without them) and the Decision draft as edited in the Publish bar and not
  // published. Kept as the page goes, from what the page holds then, so what was already
  // sent, published or discarded (a focus change drops the draft) is never brought back.
  keepDraft(operator) {
    if (!operator) return;
    const text = this.els.input.value.trim() ? this.els.input.value : "";
    const session = this.session?.id;
    const focus = this.focusChanged && session ? { session, issue: this.focus } : null;
    const agent = this.agentChanged && session ? { session, name: this.agent } : null;
    const decision = this.editedDecision();
    try {
      if (text || focus || agent || decision) {
        sessionStorage.setItem(draftKey(operator), JSON.stringify({ text, focus, agent, decision }));
      } else sessionStorage.removeItem(draftKey(operator));
    } catch {
      /* storage refused (a private window's quota): the draft is not kept */
    }
  }

  restoreDraft(operator) {
    let kept = null;
    try {
      kept = JSON.parse(sessionStorage.getItem(draftKey(operator)) || "null");
      sessionStorage.removeItem(draftKey(operator));
    } catch {
      return;
    }
    if (kept?.text && !this.els.input.value) this.els.input.value = kept.text;
    this.kept = kept; // the rest is applied when its chat opens again (load)
  }

  // The Publish bar's text when the operator changed it, with the draft it was edited from:
  // a reload brings the edit back only onto that same draft (a later turn's draft is new).
  editedDecision() {
    const d = this.decision;
    const text = this.els.publishText.value;
    if (!this.session?.id || !d || this.els.publishBar.hidden || text === d.body) return null;
    return { session: this.session.id, issue: d.issue, base: d.body, text };
  }

  forgetDraft(operator) {
    this.els.input.value = "";
    try {
      sessionStorage.removeItem(draftKey(operator));
    } catch {
      /* nothing was kept */
    }
  }

  setAgents(agents) {
    clear(this.els.agent);
    for (const agent of agents) {
      this.els.agent.append(h("option", { value: agent.name, text: `${agent.name} (${agent.repo})` }));
    }
    this.agent = agents[0]?.name || "default";
    this.els.agent.value = this.agent;
  }

  // -- sidebar ---------------------------------------------------------------------------

  async loadSessions() {
    // Loads overlap (a turn's end, a `session` event, a delete each start one) and their
    // answers may come back in any order: one asked before a newer one already shown is
    // out of date (it would paint a deleted chat back into the sidebar), so it is dropped.
    const asked = ++this.listsAsked;
    const data = await api.get("/api/operator/chat/sessions");
    if (asked < this.listShown) return this.sessions;
    this.listShown = asked;
    this.sessions = data.sessions;
    this.renderSessions();
    return this.sessions;
  }

  // The first list failed (the sign-in's load): the sidebar says so in place, not blank.
  // A list once shown stays as it was when a later one fails.
  listFailed(err) {
    if (this.listShown) return;
    const retry = () => this.loadSessions().catch((e) => this.listFailed(e));
    clear(this.els.list).append(loadFailed(`Your chats could not load: ${err.message}.`, retry));
  }

  // After an action that stands on its own (a turn, a new chat, a delete): a list that fails
  // now is listed by the next load (a turn's end, a `session` event), not an uncaught error.
  refreshSessions() {
    return this.loadSessions().catch(() => this.sessions);
  }

  renderSessions() {
    renderSidebar(this.els.list, this.sessions, {
      // A new chat's first turn: its chat is the one in front before the page holds it.
      currentId: this.session?.id ?? this.turn?.session,
      unseen: this.unseen,
      onOpen: (id) => this.open(id),
      onDelete: (id, title) => this.remove(id, title),
    });
  }

  // -- sessions --------------------------------------------------------------------------

  // `reveal`: bring the Chat screen forward (a click on a chat, a citation); the sign-in's
  // reopening of the active chat leaves the screen the address names (a reload on #board).
  async open(id, { reveal = true } = {}) {
    const shown = ++this.shown;
    let session;
    try {
      // Reopening pins it: a message sent without a session goes here (docs/api.md).
      session = await api.post(`/api/operator/chat/session/${encodeURIComponent(id)}/open`);
    } catch (err) {
      if (shown === this.shown) notify(`Could not open that chat: ${err.message}`, { level: "error" });
      return;
    }
    // A message sent while this loaded (sign-in opens the active chat while the composer is
    // already live) is on screen with its reply: repainting the stored chat would drop it.
    if (shown !== this.shown) return;
    this.unseen.delete(id);
    const listed = this.sessions.find((s) => s.id === id);
    if (listed) listed.unseen = false; // opening it saw its results (the server noted it too)
    if (reveal) this.app.show("chat");
    this.load(session);
    this.renderSessions();
    const turn = this.turn;
    if (turn) {
      // A turn runs on while another session is shown; coming back shows it again.
      turn.away = turn.session !== session.id;
      if (!turn.away) this.els.messages.append(...[turn.user, turn.view.el].filter(Boolean));
      this.markBusy();
      return;
    }
    // Only a turn still running is followed: a finished one is in the history just loaded
    // (asking anyway would replay it, or 404 when there is none).
    if (session.turn_in_flight) this.resume(session.id, session.turn_in_flight);
  }

  // Another operator signed in on this page: the chat starts as a fresh page's would.
  reset() {
    if (this.turn) {
      this.turn.abort.abort();
      this.endTurn();
    }
    this.shown += 1; // an open still loading for the last operator paints nothing
    this.sessions = [];
    this.unseen.clear();
    this.els.input.value = "";
    this.load({ messages: [] });
    this.session = null;
    this.renderSessions();
  }

  load(session) {
    this.session = session;
    // The status line speaks of this session's turn, or of nothing.
    const running = this.turn && this.turn.session === session.id;
    this.els.status.textContent = running ? this.turn.statusText || "" : "";
    this.els.status.classList.toggle("busy", Boolean(running));
    this.focus = session.focus ?? null;
    this.focusChanged = false;
    this.agent = session.agent || this.agent;
    this.agentChanged = false;
    this.decision = session.decision || null;
    const kept = this.takeKept(session.id);
    this.els.agent.value = this.agent;
    this.setTitle(session.label || session.title || "New chat");
    this.renderFocus();
    this.renderMessages(session.messages || []);
    this.renderPending(session.pending);
    this.renderPublishBar();
    // The draft's edit, onto the draft it was made on and only while the bar shows it.
    const edit = kept?.decision;
    const d = this.decision;
    if (edit && d && !this.els.publishBar.hidden && d.issue === edit.issue && d.body === edit.base) {
      this.els.publishText.value = edit.text;
    }
  }

  // What this chat held unsent before a reload (keepDraft) goes with the next message, as
  // it would have: only in the chat it was set in. A focus or an agent switch drops the
  // Decision draft, as setFocus and switchAgent do; an agent no longer offered is not kept.
  takeKept(sessionId) {
    const kept = this.kept;
    this.kept = null;
    const mine = (part) => (part && part.session === sessionId ? part : null);
    const focus = mine(kept?.focus);
    const agent = mine(kept?.agent);
    if (focus && focus.issue !== this.focus) {
      this.focus = focus.issue;
      this.focusChanged = true;
      this.decision = null;
    }
    const offered = [...this.els.agent.options].some((o) => o.value === agent?.name);
    if (agent && offered && agent.name !== this.agent) {
      this.agent = agent.name;
      this.agentChanged = true;
      this.decision = null;
    }
    return { decision: mine(kept?.decision) };
  }

  // Words were taken out of this chat (a `forget`, from any client): what it shows is read
  // again. A turn running in it ends first (its own frames come without the words), then
  // the chat is read; what the operator has not sent yet (composer, focus, agent) stays.
  async reread(id) {
    if (this.session?.id !== id) return;
    if (this.turn && this.turn.session === id) {
      this.turn.reread = id;
      return;
    }
    const shown = this.shown;
    const session = await api.get(`/api/operator/chat/session/${encodeURIComponent(id)}`);
    if (shown !== this.shown || this.session?.id !== id || this.turn) return;
    this.session = { ...this.session, ...session };
    this.setTitle(session.label || session.title || "New chat");
    this.renderMessages(session.messages || []);
    this.renderPending(session.pending);
    if (!this.focusChanged && !this.agentChanged) this.decision = session.decision || null;
    this.renderPublishBar();
  }

  // The header cuts a long title with an ellipsis: the whole of it shows when pointed at.
  setTitle(text) {
    this.els.title.textContent = text;
    this.els.title.title = text;
  }

  renderMessages(messages) {
    const box = clear(this.els.messages);
    this.rendered = new Set(messages.map((m) => m.id));
    this.hiddenOlder = messages.slice(0, Math.max(0, messages.length - PAGE));
    const shown = messages.slice(-PAGE);
    if (!messages.length) box.append(this.emptyHint());
    if (this.hiddenOlder.length) box.append(this.olderButton());
    const fragment = document.createDocumentFragment();
    for (const m of shown) fragment.append(renderStored(m));
    box.append(fragment);
    this.toLatest();
  }

  // What an empty chat says to do (taken away by the first message sent).
  emptyHint() {
    return h("p", { class: "empty", id: "chat-empty", text: this.focus
      ? `Focused on #${this.focus}. You speak first: nothing is sent until you do.`
      : "Ask anything about your repositories. Enter sends, Shift+Enter adds a line." });
  }

  olderButton() {
    return h("button", {
      class: "older",
      text: `Show earlier messages (${this.hiddenOlder.length})`,
      onclick: (ev) => {
        const page = this.hiddenOlder.splice(Math.max(0, this.hiddenOlder.length - PAGE));
        const fragment = document.createDocumentFragment();
        for (const m of page) fragment.append(renderStored(m));
        const box = this.els.messages;
        const before = box.scrollHeight;
        ev.currentTarget.replaceWith(...(this.hiddenOlder.length ? [this.olderButton()] : []), fragment);
        box.scrollTop += box.scrollHeight - before; // keep the reader where they were
      },
    });
  }

  // `reuse: false`: a chat of its own even if an empty one is shown or left (a Retry's).
  async newChat({ issue = null, reuse = true } = {}) {
    if (this.turn) {
      notify("A turn is running: stop it or let it finish first.", { level: "error" });
      return null;
    }
    // An empty chat is reused rather than another one piling up in the sidebar: the one
    // shown, else the newest empty one left from before (a reload, another tab).
    const current = this.sessions.find((s) => s.id === this.session?.id);
    if (reuse && !issue && current && isEmptyChat(current) && !this.els.messages.querySelector(".msg")) {
      this.app.show("chat");
      this.els.input.focus();
      return current;
    }
    const idle = issue || !reuse ? null : this.sessions.find((s) => s.id !== this.session?.id && isEmptyChat(s) && (!this.agent || s.agent === this.agent));
    if (idle) {
      await this.open(idle.id);
      this.els.input.focus();
      return idle;
    }
    const body = issue ? { issue, title: `Discuss #${issue}` } : {};
    if (this.agent) body.agent = this.agent;
    const shown = ++this.shown;
    const draft = this.els.input.value; // what the old chat's box held: the new one starts empty
    let session;
    try {
      session = await api.post("/api/operator/chat/new", body);
    } catch (err) {
      notify(`Could not start a new chat: ${err.message}`, { level: "error" });
      return null;
    }
    if (shown !== this.shown) return session; // the operator moved on meanwhile
    this.load({ ...session, messages: [] });
    this.app.show("chat");
    await this.refreshSessions();
    // Only the old chat's words: what the operator typed (or sent) once the new chat showed,
    // while the list reloaded, stays (clearing it lost a message typed right after Ctrl+K).
    if (this.els.input.value === draft) this.els.input.value = "";
    this.els.input.focus();
    return session;
  }

  async discuss(issue) {
    const session = await this.newChat({ issue });
    if (session) await this.offer(issue);
    return session;
  }

  // A waiting task's plan and the past Decisions offered for its question (issue 34): shown
  // when Discuss opens, the plan or the best Decision as the draft. Never published by itself.
  async offer(issue) {
    const task = this.app.board.findIssue(issue);
    if (!task || task.state !== "waiting_for_info") return;
    let detail;
    try {
      detail = await api.get(`/api/operator/tasks/${task.id}`);
    } catch {
      return; // the Discuss works without it
    }
    const panel = offerPanel(detail);
    if (!panel || this.focus !== issue) return;
    this.els.messages.append(panel);
    const plan = detail.plan?.status === "proposed";
    const body = detail.draft || (plan ? detail.plan.text : null);
    if (body) {
      this.decision = { issue, body, plan };
      this.renderPublishBar();
    }
  }

  async remove(id, title) {
    if (!window.confirm(`Delete the chat "${title}" and its messages?`)) return;
    // The sessions around it, nearest first (the one below, then the ones above): the focus
    // goes there once the list is redrawn, not to the page's start (a keyboard user deleting
    // with the Delete key would have to Tab through everything again).
    const order = [...this.els.list.querySelectorAll(".session")].map((li) => li.dataset.session);
    const at = order.indexOf(id);
    const neighbours = at < 0 ? [] : [...order.slice(at + 1), ...order.slice(0, at).reverse()];
    try {
      await api.del(`/api/operator/chat/session/${encodeURIComponent(id)}`);
    } catch (err) {
      notify(`Could not delete: ${err.message}`, { level: "error" });
      return;
    }
    if (this.session?.id === id) {
      this.session = null;
      this.decision = null;
      this.renderPublishBar();
      clear(this.els.messages).append(h("p", { class: "empty", text: "Chat deleted. Start a new one or pick another." }));
      this.setTitle("New chat");
    }
    notify(`Deleted "${title}"`);
    await this.refreshSessions();
    const left = document.activeElement;
    if (!left || left === document.body || this.els.list.contains(left)) {
      const next = neighbours
        .map((sid) => this.els.list.querySelector(`.session[data-session="${CSS.escape(sid)}"] .session-open`))
        .find(Boolean);
      (next || $("#new-chat")).focus();
    }
  }

  // -- focus, agent, decision -------------------------------------------------------------

  setFocus(issue) {
    if (issue === this.focus) return;
    this.focus = issue;
    this.focusChanged = true;
    // The server clears the draft when the focus changes; the bar goes now.
    this.decision = null;
    this.renderFocus();
    this.renderPublishBar();
  }

  renderFocus() {
    const has = this.focus !== null && this.focus !== undefined;
    show(this.els.focusChip, has);
    show(this.els.focusForm, !has);
    this.els.focusText.textContent = has ? `focus: #${this.focus}` : "";
    $("#focus-clear").setAttribute("aria-label", has ? `Clear focus #${this.focus}` : "Clear focus");
  }

  switchAgent(name) {
    if (name === this.agent) return;
    this.agent = name;
    this.agentChanged = true;
    this.decision = null;
    this.renderPublishBar();
    notify(`Agent: ${name}. It answers from your next message.`);
  }

  renderPublishBar() {
    const d = this.decision;
    const visible = Boolean(d && d.body && d.body.trim() && d.issue && this.focus === d.issue);
    show(this.els.publishBar, visible);
    if (!visible) {
      delete this.els.publishText.dataset.for; // the next draft fills the bar afresh
      return;
    }
    show(this.els.approvePlan, Boolean(d.plan));
    this.els.publishLabel.textContent = d.plan ? `Plan for #${d.issue} (edit it, or approve it as proposed)` : `Decision for #${d.issue}`;
    this.els.publishButton.textContent = `Publish to #${d.issue}`;
    if (this.els.publishText.dataset.for !== `${d.issue}:${d.body}`) {
      this.els.publishText.value = d.body;
      this.els.publishText.dataset.for = `${d.issue}:${d.body}`;
    }
  }

  async publish(words = null) {
    const d = this.decision;
    const body = words ?? this.els.publishText.value;
    if (!d || !body.trim()) return;
    this.els.publishButton.disabled = true;
    try {
      const result = await api.post("/api/operator/chat/decision", {
        issue: d.issue,
        body,
        session_id: this.session?.id,
      });
      this.decision = null;
      this.renderPublishBar();
      notify(`Published the Decision to #${result.issue}`, { link: result.comment_url });
    } catch (err) {
      notify(`Publish failed: ${err.message}. The draft is kept; try again.`, { level: "error" });
    } finally {
      this.els.publishButton.disabled = false;
    }
  }

  renderPending(pending, view) {
    $("#pending-slot")?.remove();
    if (!pending || !pending.title) return;
    const slot = h(
      "div",
      { class: "pending", id: "pending-slot" },
      h("span", { text: pending.kind === "memory" ? "Proposed memory: " : "Proposed issue: " }),
      h("strong", { text: pending.title }),
      h("button", { class: "file", text: "File", onclick: () => this.file(slot) }),
    );
    (view ? view.actions : this.els.messages).append(slot);
  }

  async file(slot) {
    try {
      const filed = await api.post("/api/operator/chat/file", { session: this.session?.id });
      slot.replaceWith(filedNote(filed.filed_issue_number, filed.filed_issue_url));
    } catch (err) {
      notify(`Filing failed: ${err.message}`, { level: "error" });
    }
  }

  // -- turns -----------------------------------------------------------------------------

  async send() {
    const text = this.els.input.value;
    if (!text.trim() || this.turn) return;
    const body = { message: text };
    if (this.session?.id) body.session = this.session.id;
    if (this.agentChanged || !this.session) body.agent = this.agent;
    if (this.focusChanged || (!this.session && this.focus)) body.focus = this.focus;
    this.els.input.value = "";
    await this.sendMessage(body, this.sendKey(text, body.session));
  }

  // Retry of a send that failed: that message, to its chat, with its key, whatever chat is
  // open now and whatever the box holds. A message the service took (only its answer was
  // lost) is the same turn then, not a second one in the chat opened since. One sent with no
  // chat open went to a new chat: it goes to a new one again, not to the chat opened since
  // (a message naming no chat goes to the one open); its body stays as sent, for its key.
  // If the service had taken it (only its answer was lost), the answer comes from the chat
  // it made then, and the new chat made for the Retry, still empty, is deleted again.
  async retry(unsent) {
    if (unsent.resent) return; // sent again already (Send, or an earlier Retry): its key with it
    if (this.turn) {
      notify("A turn is running: stop it or let it finish first.", { level: "error" });
      return;
    }
    const session = unsent.body.session;
    if (session && this.session?.id !== session) {
      await this.open(session);
      if (this.session?.id !== session || this.turn) return; // not opened (it said why), or busy
    }
    let fresh = null;
    if (!session && this.session) {
      fresh = await this.newChat({ reuse: false });
      if (!fresh || this.session?.id !== fresh.id || this.turn) return; // it said why, or moved on
    }
    unsent.resent = true;
    if (this.unsent === unsent) this.unsent = null;
    if (this.els.input.value === unsent.body.message) this.els.input.value = "";
    await this.sendMessage(unsent.body, unsent.key);
    if (fresh && this.session && this.session.id !== fresh.id) await this.dropSpare(fresh.id);
  }

  // A chat this page made that nothing went to (a Retry's, answered from another chat).
  async dropSpare(id) {
    await this.refreshSessions();
    const spare = this.sessions.find((s) => s.id === id);
    if (!spare || !isEmptyChat(spare)) return;
    try {
      await api.del(`/api/operator/chat/session/${encodeURIComponent(id)}`);
    } catch {
      return; // left empty: the sidebar does not list it, and the next New chat reuses it
    }
    await this.refreshSessions();
  }

  async sendMessage(body, key) {
    const text = body.message;
    $("#chat-empty")?.remove();
    this.sends += 1;
    this.shown += 1;
    const view = new ReplyView();
    const user = userMessage(text, "");
    this.els.messages.append(user, view.el);
    this.toLatest(); // what was just sent, and its reply as it comes, are in view
    this.startTurn(view);
    this.turn.session = body.session; // known now when the chat is: opening another one leaves it away
    let response;
    try {
      response = await openStream("POST", "/api/operator/chat/stream", { body, signal: this.turn.abort.signal, key });
    } catch (err) {
      // Sent again (Retry, or Send with the same words to the same chat) it carries the same
      // key: if the service took it and only its answer was lost, it runs no second turn.
      const unsent = { text, session: body.session, key, body, resent: false };
      this.unsent = unsent;
      this.endTurn();
      user.remove();
      view.el.remove();
      if (!this.els.messages.querySelector(".msg")) this.els.messages.prepend(this.emptyHint());
      this.els.input.value = text;
      this.els.status.textContent = err instanceof ApiError && err.status === 0 ? "offline: not sent" : "";
      this.sendFailed(err, unsent);
      return;
    }
    this.focusChanged = false;
    this.agentChanged = false;
    this.turn.session = response.headers.get("X-Steelframe-Session");
    this.turn.turnId = response.headers.get("X-Steelframe-Turn");
    this.turn.user = user;
    this.turn.started = true;
    if (this.turn.stopWanted) this.stop(); // Stop pressed before the server had the turn
    await this.follow(response);
  }

  // The idempotency key of a message about to be sent: the unsent one's when it is that
  // message again, to the same chat; else a new one.
  sendKey(text, session) {
    const unsent = this.unsent;
    this.unsent = null;
    if (!unsent || unsent.text !== text || unsent.session !== session) return newKey();
    unsent.resent = true; // its Retry, still offered, has nothing more to send
    return unsent.key;
  }

  sendFailed(err, unsent) {
    if (err instanceof ApiError && err.status === 409 && err.body?.detail?.session) {
      notify("A turn is already running: showing it.", { level: "error" });
      this.open(err.body.detail.session);
      return;
    }
    if (err instanceof ApiError && err.status === 401) return; // back at sign-in, which says so
    // Retry helps when the service could not be reached or failed for now (0, 429, 5xx); a
    // refusal of the message itself (400, 413) would only be refused again as it is.
    const status = err instanceof ApiError ? err.status : 0;
    const retry = status === 0 || status === 429 || status >= 500;
    notify(`Not sent: ${err.message}. Your message is back in the box.`, {
      level: "error",
      action: retry ? { label: "Retry", run: () => this.retry(unsent) } : null,
    });
  }

  startTurn(view) {
    this.turn = { view, lastId: 0, abort: new AbortController(), finished: false, statusText: "starting…" };
    show(this.els.send, false);
    show(this.els.stop, true);
    this.els.status.textContent = "starting…";
    this.els.status.classList.add("busy");
    this.markBusy();
  }

  endTurn() {
    const reread = this.turn?.reread;
    this.turn = null;
    if (reread) this.reread(reread).catch(() => {});
    show(this.els.send, true);
    show(this.els.stop, false);
    this.els.status.classList.remove("busy");
    this.markBusy();
  }

  // The conversation is a live region (role="log"): while the reply shown in it streams, it
  // is busy, so a screen reader announces the reply once when the turn ends (done, error,
  // stop, connection lost), not token by token (WAI-ARIA 1.2, `aria-busy`). A turn running
  // in another chat leaves the one shown alone: a result arriving there is still announced.
  markBusy() {
    if (this.turn && !this.turn.away) this.els.messages.setAttribute("aria-busy", "true");
    else this.els.messages.removeAttribute("aria-busy");
  }

  // Follow a turn's frames; if the connection drops before done/error, re-attach with
  // Last-Event-ID and carry on from the next frame (no duplicates, nothing lost).
  async follow(response) {
    const turn = this.turn;
    let phase = null; // what the status line said before the connection dropped
    for (let attempt = 0; ; attempt++) {
      try {
        turn.lastId = await readSse(response, (frame, id) => {
          turn.lastId = id;
          return this.onFrame(turn, frame);
        });
      } catch {
        /* the network dropped: resume below */
      }
      if (turn.finished || this.turn !== turn) return;
      if (attempt >= RESUME_TRIES) {
        turn.view.stopped("The connection to the service was lost. Reopen the chat to see the answer.");
        this.turnStatus(turn, "connection lost");
        // Opened again by itself once the service is back, unless the operator moved on.
        this.lost = { session: turn.session, shown: this.shown };
        this.endTurn();
        return;
      }
      // The phase last heard of is no longer news: say what the page is doing meanwhile.
      phase ??= turn.statusText;
      this.turnStatus(turn, `connection lost: reconnecting (try ${attempt + 1} of ${RESUME_TRIES})…`);
      await new Promise((r) => setTimeout(r, 500 * 2 ** attempt));
      try {
        const q = turn.turnId ? `turn=${encodeURIComponent(turn.turnId)}` : `session=${encodeURIComponent(turn.session)}`;
        response = await openStream("GET", `/api/operator/chat/stream?${q}`, { lastEventId: turn.lastId });
      } catch {
        response = null;
        if (attempt + 1 >= RESUME_TRIES) continue;
      }
      if (!response) continue;
      if (this.turn === turn) this.turnStatus(turn, phase); // back: the next frame says more
      phase = null;
    }
  }

  // The service can be reached again (the live stream opened): a chat whose turn was lost
  // with the connection is opened again, so the operator sees the reply stored meanwhile,
  // or follows the turn if it still runs (the open re-attaches), without doing it themselves.
  reconnected() {
    const lost = this.lost;
    this.lost = null;
    if (lost?.session && !this.turn && lost.shown === this.shown) this.open(lost.session, { reveal: false });
  }

  // The status line of a turn, when it is the one shown (a turn away says nothing here).
  turnStatus(turn, text) {
    turn.statusText = text;
    if (!turn.away) this.els.status.textContent = text;
  }

  onFrame(turn, frame) {
    const view = turn.view;
    switch (frame.type) {
      case FRAME.STATUS:
        if (frame.session) turn.session = frame.session;
        if (frame.turn_id) turn.turnId = frame.turn_id;
        if (typeof frame.message === "string" && turn.user?.hidden) {
          turn.user.querySelector(".body").textContent = frame.message;
          turn.user.hidden = false;
        }
        // After Stop, the status line says so until the turn ends, whatever phase follows.
        if (!turn.stopping) this.turnStatus(turn, frame.text);
        // Frames of the turn could not be relayed (docs/api.md): what streamed may have
        // skipped a part, so it stays under the reply as a warning, not only a status line.
        if (frame.reason === STATUS_REASON.FRAMES_LOST && !turn.lostNote) {
          turn.lostNote = lostNote(frame.text);
          view.hits.before(turn.lostNote); // under the reply's text, above its hits
        }
        break;
      case FRAME.THINKING:
        view.addThinking(frame.text);
        break;
      case FRAME.DELTA:
        view.addDelta(frame.text, frame.replace);
        break;
      case FRAME.DONE:
        turn.finished = true;
        this.finishTurn(turn, frame.response);
        return false;
      case FRAME.ERROR:
        turn.finished = true;
        this.failTurn(turn, frame);
        return false;
      default:
        break;
    }
    return true;
  }

  finishTurn(turn, r) {
    if (turn.away) {
      // Finished while another session is shown: it is saved; say so, change nothing here.
      this.endTurn();
      this.unseen.add(r.session);
      this.loadSessions().catch(() => {});
      notify("The reply you were waiting for is ready.", {
        action: { label: "Open chat", run: () => this.open(r.session) },
        os: true,
      });
      return;
    }
    const id = `${r.turn_id}-a`;
    // The chat was opened again after the reply was stored and before its stream ended: the
    // history brought the reply and the message, so the streamed ones go. A turn sent from
    // this page as much as one re-attached on opening: a sent turn's stream, cut and
    // re-attached, may end after the operator reopened the chat.
    if (this.rendered.has(id)) {
      turn.view.el.remove();
      turn.user?.remove();
      // The warning goes with the reply as the history shows it.
      const stored = this.els.messages.querySelector(`.msg.assistant[data-id="${CSS.escape(id)}"]`);
      if (turn.lostNote && stored) stored.querySelector(".hits-slot")?.before(turn.lostNote);
    } else {
      this.rendered.add(id);
      turn.view.finish({
        id,
        content: r.reply,
        reasoning: r.reasoning,
        retrieved: r.retrieved,
        retrieveHits: r.retrieve_hits,
        memoryVerdict: r.memory_verdict,
      });
      if (turn.user?.hidden) turn.user.remove(); // resumed, and never told what was asked
      else if (turn.user) turn.user.dataset.id = `${r.turn_id}-u`;
      // The reply itself says "Filed as #N: URL" (as the stored one will): no second line.
      const said = r.filed_issue_number && (r.reply || "").includes(`Filed as #${r.filed_issue_number}`);
      if (r.filed_issue_number && !said) turn.view.actions.append(filedNote(r.filed_issue_number, r.filed_issue_url));
      else if (r.pending_title)
        this.renderPending({ title: r.pending_title, body: r.pending_body, kind: r.pending_kind }, turn.view);
    }
    const hits = r.retrieve_hits ? ` · ${r.retrieve_hits} ${r.retrieve_hits === 1 ? "hit" : "hits"}` : "";
    this.els.status.textContent = `done${hits}`;
    if (turn.stopLate && r.filed_issue_number) {
      this.els.status.textContent = `too late to stop: #${r.filed_issue_number} was already filed`;
      notify(`Stop came too late: #${r.filed_issue_number} was already filed.`, { level: "error" });
    }
    if (!this.session || this.session.id !== r.session) this.session = { id: r.session, messages: [] };
    this.focus = r.focus ?? null;
    this.agent = r.agent || this.agent;
    this.els.agent.value = this.agent;
    this.decision = r.decision_body && r.decision_issue ? { body: r.decision_body, issue: r.decision_issue } : null;
    this.renderFocus();
    this.renderPublishBar();
    this.endTurn();
    this.refreshSessions().then(() => {
      const s = this.sessions.find((x) => x.id === r.session);
      if (s) this.setTitle(s.label || s.title || "New chat");
    });
    this.app.taskMayHaveChanged();
  }

  failTurn(turn, frame) {
    const stopped = frame.reason === ERROR_REASON.STOPPED;
    const text = stopped
      ? "Stopped. Nothing of this turn was kept; your next message starts fresh."
      : `The turn failed${frame.reason ? ` (${frame.reason})` : ""}: ${frame.error}. Try again.`;
    turn.view.stopped(text);
    if (stopped && turn.user) turn.user.classList.add("stopped");
    if (!turn.away) this.els.status.textContent = stopped ? "stopped" : "failed";
    this.endTurn();
  }

  async stop() {
    if (!this.turn) return;
    const turn = this.turn;
    turn.stopping = true;
    this.turnStatus(turn, "stopping…");
    if (!turn.started) {
      turn.stopWanted = true;
      return;
    }
    // "Nothing in flight" while our stream is still open means the stop crossed the turn's
    // start on the server: ask again (briefly) until it lands or the turn ends.
    // About 15 s in all: a loaded service may take seconds to register the turn.
    for (let attempt = 0; attempt < 12 && this.turn === turn && !turn.finished; attempt++) {
      let result;
      try {
        result = await api.post("/api/operator/chat/stop");
      } catch (err) {
        notify(`Stop failed: ${err.message}`, { level: "error" });
        return;
      }
      if (result.reason === "finishing") {
        turn.stopLate = true; // the answer (and what it filed) is being kept: say so at done
        this.turnStatus(turn, "too late to stop: the answer is being saved");
      }
      if (result.stopped || result.reason) return;
      await new Promise((r) => setTimeout(r, Math.min(200 * (attempt + 1), 1500)));
    }
  }

  // After opening a session (or reloading the page), re-attach to the turn still running in
  // it: the operator's own message (the turn's first frame carries it) and the reply so far.
  async resume(sessionId, turnId) {
    if (this.turn) return;
    let response;
    try {
      response = await openStream("GET", `/api/operator/chat/stream?turn=${encodeURIComponent(turnId)}`);
    } catch {
      return; // it ended meanwhile: the next load of the session has it
    }
    if (this.session?.id !== sessionId || this.turn || this.rendered.has(`${turnId}-a`)) {
      response.body?.cancel().catch(() => {});
      return;
    }
    $("#chat-empty")?.remove();
    const view = new ReplyView();
    const user = userMessage("", "");
    user.hidden = true; // until the first frame says what was asked
    this.els.messages.append(user, view.el);
    this.startTurn(view);
    Object.assign(this.turn, { session: sessionId, turnId, user, started: true });
    await this.follow(response);
  }

  // `#N` links only a run the Board knows: a reply that finished before the Board learned of
  // N (filed in that very turn, or the Board still loading) gets its link when the Board
  // does, as the stored reply will after a reload.
  relinkCitations() {
    for (const body of this.els.messages.querySelectorAll(".msg.assistant .body.markdown")) linkCitations(body);
  }

  // A task result pushed by the events stream, shown once in its session.
  addResult(result) {
    if (this.rendered.has(result.message_id)) return false;
    if (this.session?.id === result.session_id) {
      this.rendered.add(result.message_id);
      const view = new ReplyView(result.message_id);
      view.finish({ id: result.message_id, content: result.text });
      this.els.messages.append(view.el);
      this.els.messages.scrollTop = this.els.messages.scrollHeight;
      // Shown in the open session: seen, so no dot comes back with the next list or reload.
      api.post(`/api/operator/chat/session/${encodeURIComponent(result.session_id)}/seen`).catch(() => {});
      return true;
    }
    this.unseen.add(result.session_id);
    this.renderSessions();
    return false;
  }
}

function draftKey(operator) {
  return `steelframe:draft:${operator}`;
}

// A lasting warning under a reply (text as text: never markup); a note to assistive
// technology too, which heard the same words as the status line changed.
function lostNote(text) {
  return h("p", { class: "lost-note", role: "note", text: `Warning: ${text}` });
}

function filedNote(number, url) {
  return h("p", { class: "filed" }, "Filed as ", url ? externalLink(url, `#${number}`) : `#${number}`);
}
