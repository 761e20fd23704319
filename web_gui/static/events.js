// Live updates: the operator events stream (SSE; EventSource resumes with Last-Event-ID by
// itself). When the service refuses the stream (a 503 while its Redis is away, or no stream
// here), EventSource gives up for good: the Board is polled instead, and the stream is tried
// again after a pause that doubles (RETRY_MIN_MS up to RETRY_MAX_MS), from the last event id
// seen, until it opens; then polling stops.
const POLL_MS = 4000;
const RETRY_MIN_MS = 1000;
const RETRY_MAX_MS = 30000;

export class LiveUpdates {
  constructor({ onTask, onResult, onSession, onResync, onPoll, onLedger, onReview, onFixRun }) {
    // `resync`: events after our id were dropped, so reload what is shown. `ledger`: a
    // task's review threads changed. `review`, `fix_run`: a run took review threads up, or
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
    this.source = null;
    this.timer = null;
    this.retry = null;
    this.retryMs = RETRY_MIN_MS;
    this.lastId = null; // the last event id seen, to re-open a refused stream from
    this.recovering = false; // the stream was refused; polling stands in until it opens
    this.mode = "none";
  }

  start() {
    this.mode = "connecting";
    // A new EventSource does not carry the old one's Last-Event-ID: the query says it.
    const from = this.lastId === null ? "" : `?last_event_id=${encodeURIComponent(this.lastId)}`;
    const source = new EventSource(`/api/operator/events${from}`);
    this.source = source;
    for (const type of Object.keys(this.handlers)) {
      source.addEventListener(type, (ev) => this.dispatch(type, ev.data, ev.lastEventId));
    }
    source.onmessage = (ev) => this.dispatch(null, ev.data, ev.lastEventId);
    source.onopen = () => {
      if (this.source !== source) return;
      this.mode = "stream";
      this.retryMs = RETRY_MIN_MS;
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
      if (this.source === source && source.readyState === EventSource.CLOSED) {
        this.source = null;
        this.recovering = true;
        this.poll();
        this.retryLater();
      }
    };
  }

  retryLater() {
    if (this.retry) return;
    const wait = this.retryMs;
    this.retryMs = Math.min(this.retryMs * 2, RETRY_MAX_MS);
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
    this.source?.close();
    this.source = null;
    clearTimeout(this.retry);
    this.retry = null;
    this.stopPolling();
  }
}
