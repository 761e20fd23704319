// The web GUI's entry module: sign-in, screens (Chat, Board, Dashboard), keyboard, live updates.
import { api, ApiError, onSignedOut, setCsrf } from "./api.js";
import { Board, RUNNING } from "./board.js";
import { Chat } from "./chat.js";
import { setCitationHandler } from "./citations.js";
import { Dashboard } from "./dashboard.js";
import { $, clear, refreshAges, show } from "./dom.js";
import { LiveUpdates } from "./events.js";
import { fixRunWords, reviewWords } from "./loop_news.js";
import { notify, offerDesktopAlerts } from "./notify.js";
import { PolledNews } from "./polled_news.js";

const SCREENS = ["chat", "board", "dashboard"];
const AGES_MS = 30000; // how often "N min ago" and the sidebar's days are brought up to date
const RESULT_WORDS = { delivered: "delivered", question: "has a question", failed: "failed" };
// A result and the task's state change are one event: one notification between them.
const RESULT_STATE = { delivered: "delivered", question: "waiting_for_info", failed: "failed" };
// Task states worth a notification, in words (merged and closed end the pull request loop).
const STATE_WORDS = {
  delivered: "delivered",
  waiting_for_info: "is waiting for you",
  failed: "failed",
  merged: "was merged",
  closed: "was closed without a merge",
};

/** An element keystrokes type into (a text field, a text area, an editable region). */
function isTextEntry(el) {
  if (!el) return false;
  if (el.isContentEditable || el.tagName === "TEXTAREA") return true;
  return el.tagName === "INPUT" && !["button", "checkbox", "radio", "submit", "reset"].includes(el.type);
}

// http_edge/cookies.py CSRF_COOKIE: set at sign-in with the session cookie (HttpOnly, so not
// readable here), with the same lifetime, and deleted with it at sign-out.
function hasSignInCookie() {
  return document.cookie.split(";").some((c) => c.trim().startsWith("steelframe_csrf="));
}

class App {
  constructor() {
    this.chat = null;
    this.board = null;
    this.dashboard = null;
    this.live = null;
    this.knownStates = new Map();
    this.polledNews = new PolledNews();
    this.polling = null; // the poll under way: a slow one is never run twice at once
    this.operator = null; // who is signed in on this page (or was last)
  }

  async boot() {
    $("#signin-form").addEventListener("submit", (ev) => {
      ev.preventDefault();
      this.signIn();
    });
    // Every request that finds the session ended says so: the first one signs out and
    // places the focus, a later one (a reload the live stream asked for, answered 401 too)
    // would move it into the token field under the operator's typing.
    onSignedOut(() => {
      if (!$("#app").hidden) this.signedOut("Your session ended: sign in again.");
    });
    // A sign-in link carries a one-time code (`steelframe desktop`, docs/gui.md), never a
    // token: it leaves the address bar and history at once, is bound to this browser, and
    // signs in only when the person confirms whose account it opens. An old `#token=` link
    // is dropped unread: it signs nobody in (login CSRF, issue 35).
    const fragment = location.hash;
    if (fragment.startsWith("#code=") || fragment.startsWith("#token=")) {
      history.replaceState(null, "", location.pathname + location.search);
    }
    if (fragment.startsWith("#code=")) {
      await this.offerLink(decodeURIComponent(fragment.slice(6)));
      document.body.dataset.ready = "true";
      return;
    }
    // Only the sign-in check decides whether the operator is signed in: a load of the app
    // that fails after it (the chats list answered 503) is said in the app, not answered
    // with the sign-in card, which would read as a sign-out to someone still signed in.
    // A browser that holds no sign-in (the CSRF cookie, readable on purpose, is set and
    // dropped with the session's) is not asked about one: the answer is a 401, an error in
    // the console of every first visit.
    let who = null;
    try {
      if (!hasSignInCookie()) throw new ApiError(401, {});
      who = await api.get("/gui/session");
    } catch (err) {
      const unsure = !(err instanceof ApiError && err.status === 401);
      this.signedOut(unsure ? `Could not check your sign-in: ${err.message}. Reload to try again.` : "");
    }
    if (who) await this.enter(who);
    document.body.dataset.ready = "true";
    document.body.dataset.readyMs = String(Math.round(performance.now())); // bench/gui.py
  }

  /** Claim a link's code for this browser, then ask before signing in. */
  async offerLink(code) {
    let claimed;
    try {
      claimed = await api.post("/gui/link", { code });
    } catch (err) {
      this.signedOut(`That sign-in link did not work: ${err.message}`);
      return;
    }
    show($("#signin-form"), false);
    show($("#link-form"), true);
    show($("#signin"), true);
    $("#link-question").textContent = `Sign in as ${claimed.operator}?`;
    const done = () => {
      show($("#link-form"), false);
      show($("#signin-form"), true);
    };
    $("#link-cancel").addEventListener("click", () => {
      done();
      this.signedOut();
    });
    $("#link-form").addEventListener("submit", async (ev) => {
      ev.preventDefault();
      try {
        const who = await api.post("/gui/link/confirm", {});
        done();
        await this.enter(who);
      } catch (err) {
        done();
        this.signedOut(`Sign-in failed: ${err.message}`);
      }
    });
    $("#link-confirm").focus();
  }

  async signIn() {
    const input = $("#token");
    const error = $("#signin-error");
    error.textContent = "";
    try {
      const who = await api.post("/gui/session", { token: input.value });
      input.value = "";
      await this.enter(who);
    } catch (err) {
      error.textContent =
        err instanceof ApiError && err.status === 401
          ? "That token is not valid. Copy it again from `steelframe operator create` or the dev output."
          : `Sign-in failed: ${err.message}`;
    }
  }

  signedOut(message = "") {
    // Someone typing in the app when the session ends keeps typing for a moment: with the
    // token field focused, the rest of their message and its Enter went in there and were
    // sent as a token, and "That token is not valid" replaced why they were signed out.
    // The sign-in card takes the focus then (screen readers land there too), not the field.
    const typing = isTextEntry(document.activeElement) && $("#app").contains(document.activeElement);
    this.live?.stop();
    show($("#app"), false);
    show($("#signin"), true);
    $("#signin-error").textContent = message;
    (typing ? $("#signin-title") : $("#token")).focus();
  }

  async enter(who) {
    setCsrf(who.csrf_token);
    // Another operator signing in on this page (a shared machine): nothing of the last one's
    // chat may show (its title, focus, notifications), and their session is not this one's.
    // The same operator signing in again (their session ended) finds the page as they left it.
    if (this.chat && this.operator !== who.operator) {
      this.chat.reset();
      clear($("#toasts"));
    }
    this.operator = who.operator;
    $("#operator-name").textContent = who.operator;
    show($("#signin"), false);
    show($("#app"), true);
    if (!this.chat) this.setup();
    this.chat.restoreDraft(who.operator); // what was typed before a reload of this tab
    this.chat.setAgents(who.agents);
    const sends = this.chat.sends;
    const shown = this.chat.shown; // moves when the operator sends, opens or starts a chat
    // The Board first (in parallel): replies link `#N` to runs it knows.
    // A list that fails is said here; the live stream's first opening lists them again.
    const [sessions] = await Promise.all([
      this.chat.loadSessions().catch((err) => {
        notify(`Your chats could not load: ${err.message}. They are listed again once the service answers.`, { level: "error" });
        this.chat.listFailed(err);
        return [];
      }),
      this.board.load().catch((err) => notify(`The Board could not load: ${err.message}`, { level: "error" })),
    ]);
    // The composer is live as soon as the app shows: a message sent while the sessions
    // loaded is already on screen, rendering the stored chat now would wipe its reply, and
    // the list read before it lacks its chat. A chat the operator started or opened
    // meanwhile (Ctrl+K, the sidebar) stands too: the active one read before is no longer.
    const active = sessions.find((s) => s.active) || null;
    if (this.chat.sends !== sends) await this.chat.loadSessions().catch(() => {});
    else if (this.chat.shown !== shown) this.chat.renderSessions();
    else if (active) await this.chat.open(active.id, { reveal: false });
    else this.chat.renderMessages([]);
    this.show(location.hash.slice(1) || "chat");
    for (const t of this.board.list()) this.knownStates.set(t.id, t.state);
    this.polledNews.remember(this.board.list());
    this.live = new LiveUpdates({
      onTask: (t) => this.onTask(t),
      onResult: (r) => this.onResult(r),
      onSession: (e) => {
        if (e.change === "forgotten") this.chat.reread(e.session_id).catch(() => {});
        this.chat.loadSessions().catch(() => {});
      },
      onLedger: (e) => this.board.applyLedger(e),
      onReview: (e) => this.onReview(e),
      onFixRun: (e) => this.onFixRun(e),
      onResync: () => this.poll().then(() => this.chat.loadSessions()).catch(() => {}),
      onPoll: () => this.poll(),
      onConnection: (lost) => {
        $("#connection").textContent = lost
          ? "The connection to the service was lost: reconnecting… The Board and your chats catch up once it is back."
          : "";
      },
      onReachable: () => this.chat.reconnected(),
    });
    this.live.start();
    // Signed in: the composer has the focus (where the sign-in form had it), unless the
    // operator already moved it.
    const left = document.activeElement;
    const unplaced = !left || left === document.body || $("#signin").contains(left);
    if (unplaced && document.body.dataset.screen === "chat") $("#message").focus();
  }

  setup() {
    this.chat = new Chat(this);
    this.board = new Board(this);
    this.dashboard = new Dashboard(this);
    for (const name of SCREENS) {
      $(`#tab-${name}`).addEventListener("click", () => this.show(name));
    }
    $("#sign-out").addEventListener("click", () => this.signOut());
    // The composer's words are kept as the page goes (a reload, a closed phone tab).
    const keep = () => {
      if (!$("#app").hidden) this.chat.keepDraft(this.operator);
    };
    window.addEventListener("pagehide", keep);
    document.addEventListener("visibilitychange", () => {
      if (document.visibilityState === "hidden") keep();
    });
    offerDesktopAlerts($("#desktop-alerts"));
    window.addEventListener("hashchange", () => this.show(location.hash.slice(1)));
    setCitationHandler({
      session: (id) => this.chat.open(id),
      issue: (n) => this.board.openIssue(n),
      knowsIssue: (n) => this.board.findIssue(n) !== null,
    });
    document.addEventListener("keydown", (ev) => this.onKey(ev));
    // A page left open keeps its times true: "just now" on a card becomes "2 h ago", and the
    // sidebar's Today becomes Yesterday after midnight, with no event to redraw them.
    let day = new Date().toDateString();
    setInterval(() => {
      refreshAges();
      if (new Date().toDateString() === day) return;
      day = new Date().toDateString();
      this.chat.renderSessions();
    }, AGES_MS);
    $("#menu-toggle").addEventListener("click", () => this.drawer(!$("#app").classList.contains("drawer-open")));
    $("#drawer-backdrop").addEventListener("click", () => this.drawer(false));
    // Widened past the drawer's edge (style.css, 760 px) the sidebar is a column again: no
    // drawer is open then, and nothing of the page stays inert.
    matchMedia("(max-width: 760px)").addEventListener("change", (ev) => {
      if (!ev.matches) this.drawer(false);
    });
    $("#sidebar").addEventListener("click", (ev) => {
      if (ev.target.closest(".session-open, #new-chat")) this.drawer(false);
    });
    $(".skip[href='#message']").addEventListener("click", (ev) => {
      ev.preventDefault();
      this.show("chat");
      $("#message").focus();
    });
  }

  // Narrow windows: the sessions sidebar slides in over the page (docs/gui.md). While it is
  // open the page under it is inert: Tab stays in the drawer, not on controls it covers.
  drawer(open) {
    const toggle = $("#menu-toggle");
    if (open === $("#app").classList.contains("drawer-open")) return;
    $("#app").classList.toggle("drawer-open", open);
    for (const el of [$(".main"), ...document.querySelectorAll(".skip")]) el.inert = open;
    toggle.setAttribute("aria-expanded", String(open));
    if (open) $("#new-chat").focus();
    else if (getComputedStyle(toggle).display !== "none") toggle.focus();
  }

  show(name) {
    if (!SCREENS.includes(name)) name = "chat";
    for (const screen of SCREENS) {
      show($(`#screen-${screen}`), screen === name);
      const tab = $(`#tab-${screen}`);
      if (screen === name) tab.setAttribute("aria-current", "page");
      else tab.removeAttribute("aria-current");
    }
    show($("#chat-controls"), name === "chat");
    if (location.hash.slice(1) !== name) history.replaceState(null, "", `#${name}`);
    document.body.dataset.screen = name;
  }

  onKey(ev) {
    const typing = ["INPUT", "TEXTAREA", "SELECT"].includes(document.activeElement?.tagName);
    // An open dialog (the run modal, a confirmation) has the keyboard: Esc closes it (the
    // browser's own action) and is not also a Stop for a chat turn running behind it, and
    // Ctrl+K or `/` do not change the screen under it.
    if (document.querySelector("dialog[open]")) return;
    if ((ev.ctrlKey || ev.metaKey) && ev.key.toLowerCase() === "k") {
      ev.preventDefault();
      this.chat.newChat();
    } else if (ev.key === "Escape" && $("#app").classList.contains("drawer-open")) {
      this.drawer(false);
    } else if (ev.key === "Escape" && this.chat.turn) {
      this.chat.stop();
    } else if (ev.key === "/" && !typing) {
      ev.preventDefault();
      this.show("chat");
      $("#message").focus();
    }
  }

  async signOut() {
    try {
      await api.del("/gui/session");
    } catch (err) {
      notify(`Sign-out failed: ${err.message}`, { level: "error" });
      return;
    }
    this.chat.forgetDraft(this.operator); // signed out on purpose: nothing of theirs stays
    this.signedOut("Signed out.");
  }

  onTask(task) {
    const before = this.knownStates.get(task.task_id);
    this.knownStates.set(task.task_id, task.state);
    this.board.apply(task);
    if (before === task.state) return;
    // The change's result follows into the chat in front of the operator (the event names
    // it): shown there, it tells this change, and a notification would tell it twice.
    if (this.inFront(task.result_session)) return;
    this.announceState(task.task_id, task.issue, task.title, task.state, task.pr_url);
  }

  // The chat open on the Chat screen of a visible tab: what arrives in it is in front of the
  // operator, and needs no notification.
  inFront(sessionId) {
    const open = Boolean(sessionId) && this.chat.session?.id === sessionId;
    return open && document.body.dataset.screen === "chat" && !document.hidden;
  }

  onResult(result) {
    const words = RESULT_WORDS[result.kind] || result.kind;
    const shownInChat = this.chat.addResult(result);
    if (!shownInChat || !this.inFront(result.session_id)) {
      // Named as the operator knows it (the issue), one notification per task.
      const issue = this.board.tasks.get(result.task_id)?.issue;
      const name = issue ? `#${issue}` : `Task ${result.task_id}`;
      notify(`${name} ${words}: ${result.text}`, {
        key: `result:${result.message_id}`,
        group: `task:${result.task_id}`,
        event: RESULT_STATE[result.kind] || result.kind,
        os: true,
        upgrade: true, // the result's own words replace the bare state change
        level: result.kind === "failed" ? "error" : "info",
        action: { label: "Open chat", run: () => this.chat.open(result.session_id) },
      });
    }
  }

  // A review pickup or a fix run, from the events stream or read by a poll: the same key.
  onReview(e, onCard = true) {
    this.onNews(e, reviewWords(e), `review:${e.task_id}:${e.at}:${(e.threads || []).join(",")}`, onCard);
  }

  onFixRun(e, onCard = true) {
    this.onNews(e, fixRunWords(e), `fix_run:${e.task_id}:${e.head_sha}:${e.run}`, onCard);
  }

  // The card says what the run does (unless a poll read it after the run ended), and one
  // notification per event (`key`), in the task's place (`group`) like its state changes.
  onNews(event, words, key, onCard = true) {
    if (onCard) this.board.applyNews(event.task_id, words);
    const task = this.board.tasks.get(event.task_id);
    const issue = event.issue ?? task?.issue;
    notify(`${issue ? `#${issue}` : `Task ${event.task_id}`}: ${words}`, {
      key,
      group: `task:${event.task_id}`,
      event: key,
      os: true,
      link: event.pr_url ?? task?.pr_url ?? null,
    });
  }

  announceState(taskId, issue, title, state, prUrl = null) {
    const words = STATE_WORDS[state];
    if (!words) return;
    const named = title ? `#${issue} (${title})` : `#${issue}`;
    notify(`${named} ${words}`, {
      key: `state:${taskId}:${state}`,
      group: `task:${taskId}`,
      event: state,
      os: true,
      // The end of the loop links the pull request it ended.
      link: ["merged", "closed"].includes(state) ? prUrl : null,
    });
  }

  // Without an events stream (or after it missed events): refresh the Board and announce
  // what changed, as the stream would have: state changes, then review pickups and fix runs.
  poll() {
    this.polling ??= this.pollOnce().finally(() => {
      this.polling = null;
    });
    return this.polling;
  }

  async pollOnce() {
    await this.board.load();
    const tasks = this.board.list();
    for (const t of tasks) {
      const before = this.knownStates.get(t.id);
      this.knownStates.set(t.id, t.state);
      // A task first seen now (filed since the page loaded) counts as a change too.
      if (before !== t.state) this.announceState(t.id, t.issue, t.title, t.state, t.pr_url);
    }
    for (const task of this.polledNews.moved(tasks)) {
      // An open run modal follows its task, as a `task` or `ledger` event makes it.
      if (this.board.modalTask === task.id) this.board.openModal(task.id);
      // Review pickups and fix runs: the Board's row carries the latest of each.
      const running = RUNNING.has(task.state); // else the run it speaks of is over
      for (const { type, frame } of this.polledNews.news(task)) {
        if (type === "review") this.onReview(frame, running);
        else this.onFixRun(frame, running);
      }
    }
  }

  // After a turn that may have filed work: the Board catches up without waiting for a poll.
  taskMayHaveChanged() {
    if (this.live?.mode !== "stream") this.board.load().catch(() => {});
  }
}

new App().boot();
