// Live updates: the operator events stream (SSE; EventSource resumes with Last-Event-ID by
// itself). When the service refuses the stream, EventSource gives up for good without saying
// why: the Board is polled instead, and one plain request for the stream (aborted once its
// status is known) tells the two refusals apart. Refused for now (a 503 while the service's
// Redis is away, a proxy's 502/503/504 while the service behind it is stopped, or no answer
// at all): the stream is tried again after a pause
// that doubles (RETRY_MIN_MS up to RETRY_MAX_MS), from the last event id seen, until it
// opens; then polling stops. Not there (a 404: a service or a proxy without the stream):
// polling goes on, and the stream is asked again only every NO_STREAM_RETRY_MS, not every
// 30 s forever, each try a failed request in the console.
import { proxyAway } from "./api.js";

// A test hook, never set by the GUI itself: `window.steelframeTestTimeScale` (a number > 0,
// set by a test's init script before the page's modules load) multiplies the pauses below,
// so the browser tests wait a few seconds, not minutes, on the same sequence: scaled alike,
// the pauses keep their proportions, which is what the tests check (three polls pass
// before a refusal for now would have re-opened the stream four times). The probe's timeout
// is not a pause of the sequence: it stays as it is.
const TIME_SCALE = Number(globalThis.steelframeTestTimeScale) > 0 ? Number(globalThis.steelframeTestTimeScale) : 1;
const POLL_MS = 4000 * TIME_SCALE;
const RETRY_MIN_MS = 1000 * TIME_SCALE;
const RETRY_MAX_MS = 30000 * TIME_SCALE;
// Not never: behind a load balancer an older instance may be the one without the stream, or
// the service may be upgraded under an open page; ten minutes costs two failed requests.
const NO_STREAM_RETRY_MS = 600000 * TIME_SCALE;
const PROBE_TIMEOUT_MS = 10000; // a probe that has no answer by then counts as a network break
const EVENTS = "/api/operator/events";

// How the stream is answered: its status (0: no answer) and whether the service itself
// cannot be reached (no answer, or a proxy's gateway error: api.js proxyAway). A 200 is a
// stream: it is aborted unread once its headers are in.
async function streamAnswer() {
  const abort = new AbortController();
  const timer = setTimeout(() => abort.abort(), PROBE_TIMEOUT_MS);
  try {
    const response = await fetch(EVENTS, {
      credentials: "same-origin",
      headers: { Accept: "text/event-stream" },
      signal: abort.signal,
    });
    // An error's small body is read to its end (whose it is: the service's JSON or a
    // proxy's page); only a stream (a 200) is cut off.
    const body = response.ok ? null : await response.text().catch(() => "");
    return { status: response.status, away: !response.ok && proxyAway(response.status, parsed(body)) };
  } catch {
    return { status: 0, away: true };
  } finally {
    clearTimeout(timer);
    abort.abort();
  }
}

function parsed(text) {
  try {
    return JSON.parse(text);
  } catch {
    return null;
  }
}

export class LiveUpdates {
  constructor({ onTask, onResult, onSession, onResync, onPoll, onLedger, onReview, onFixRun, onConnection, onReachable }) {
    // `task`: a task's card as the Board lists it (its state, pull request loop and, while
    // it waits, its question): applied as it is, nothing read again. `resync`: events after
    // our id were dropped, so reload what is shown. `ledger`: a task's review threads changed. `review`, `fix_run`: a run took review threads up, or
    // failing CI started a fix run.
    this.handlers = {
      task: onTask,
      result: onResult,
      session: onSession,
      resync: onResync,
      ledger: onLedger,
      review: onReview,
      fix_run: onFixRun,
    };
    this.onPoll = onPoll;
    // `onConnection(lost)`: whether the service cannot be reached now, for the page to say.
    this.onConnection = onConnection ?? (() => {});
    // `onReachable()`: the service answered (the stream opened, or refused it for now).
    this.onReachable = onReachable ?? (() => {});
    this.failedTries = 0; // the browser's reconnects in a row that failed
    this.source = null;
    this.timer = null;
    this.retry = null;
    this.retryMs = RETRY_MIN_MS;
    this.lastId = null; // the last event id seen, to re-open a refused stream from
    this.recovering = false; // the stream was refused; polling stands in until it opens
    this.mode = "none";
    this.run = 0; // counts stop()s: a probe answered after one schedules nothing
  }

  start() {
    this.mode = "connecting";
    // A new EventSource does not carry the old one's Last-Event-ID: the query says it.
    const from = this.lastId === null ? "" : `?last_event_id=${encodeURIComponent(this.lastId)}`;
    const source = new EventSource(`${EVENTS}${from}`);
    this.source = source;
    for (const type of Object.keys(this.handlers)) {
      source.addEventListener(type, (ev) => this.dispatch(type, ev.data, ev.lastEventId));
    }
    source.onmessage = (ev) => this.dispatch(null, ev.data, ev.lastEventId);
    source.onopen = () => {
      if (this.source !== source) return;
      this.mode = "stream";
      this.retryMs = RETRY_MIN_MS;
      this.failedTries = 0;
      this.onConnection(false);
      this.onReachable();
      // Opened without a position (the first time, after the page's own loads, or again
      // when no event came before a refusal: the stream's opening `id:` line is not shown to
      // scripts), it starts "now": reload what is shown, as for `resync`, so what happened
      // between those loads and this open is not missed.
      if (this.lastId === null) this.handlers.resync?.({});
      this.recovering = false;
      document.body.dataset.live = "stream"; // connected: what happens from now on shows
      this.stopPolling();
    };
    source.onerror = () => {
      // CONNECTING: the browser reconnects by itself (with Last-Event-ID). CLOSED: the
      // service refused (a 503 while its Redis is away, no such stream here): poll the
      // Board meanwhile, and try the stream again later.
      if (this.source !== source) return;
      if (source.readyState === EventSource.CLOSED) {
        this.source = null;
        this.recovering = true;
        this.poll();
        this.refused();
        return;
      }
      // The stream dropped: one drop the browser's first reconnect mends is no news (a
      // proxy's idle timeout, a service restarting); a reconnect that failed too means the
      // service cannot be reached, and the page says so until the stream is back.
      this.failedTries += 1;
      if (this.failedTries >= 2) this.onConnection(true);
    };
  }

  async refused() {
    const run = this.run;
    const { status, away } = await streamAnswer();
    if (run !== this.run || this.source) return; // stopped, or re-opened meanwhile
    // Answered (a 503 while Redis is away, a 404): the service is there, polled meanwhile.
    // No answer, or a proxy's "the service behind me is away": it cannot be reached.
    this.onConnection(away);
    if (!away) this.onReachable();
    if (status === 404) {
      this.mode = "no-stream";
      this.retryLater(NO_STREAM_RETRY_MS);
    } else {
      this.retryLater();
    }
  }

  retryLater(pause = null) {
    if (this.retry) return;
    const wait = pause ?? this.retryMs;
    if (pause === null) this.retryMs = Math.min(this.retryMs * 2, RETRY_MAX_MS);
    this.retry = setTimeout(() => {
      this.retry = null;
      this.start();
    }, wait);
  }

  dispatch(type, raw, id) {
    if (id) this.lastId = id;
    let data;
    try {
      data = JSON.parse(raw);
    } catch {
      return;
    }
    const kind = type || data.type;
    const payload = data.data && typeof data.data === "object" && !type ? data.data : data;
    this.handlers[kind]?.(payload);
  }

  poll() {
    if (this.timer) return;
    this.mode = "poll";
    document.body.dataset.live = "poll"; // polling: news comes from the Board (polled_news.js)
    this.timer = setInterval(() => this.onPoll().catch(() => {}), POLL_MS);
  }

  stopPolling() {
    clearInterval(this.timer);
    this.timer = null;
  }

  stop() {
    this.run += 1;
    this.failedTries = 0;
    this.onConnection(false);
    this.source?.close();
    this.source = null;
    clearTimeout(this.retry);
    this.retry = null;
    this.stopPolling();
  }
}
