// Live updates: the operator events stream (SSE; EventSource resumes with Last-Event-ID by
// itself). Where the service has no stream, the Board is polled instead.
const POLL_MS = 4000;

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
    this.mode = "none";
  }

  start() {
    this.mode = "connecting";
    this.source = new EventSource("/api/operator/events");
    for (const type of Object.keys(this.handlers)) {
      this.source.addEventListener(type, (ev) => this.dispatch(type, ev.data));
    }
    this.source.onmessage = (ev) => this.dispatch(null, ev.data);
    this.source.onopen = () => {
      this.mode = "stream";
      document.body.dataset.live = "stream"; // connected: what happens from now on shows
      this.stopPolling();
    };
    this.source.onerror = () => {
      // CONNECTING: the browser reconnects by itself (with Last-Event-ID). CLOSED: the
      // service refused (no such stream here, or signed out): poll the Board instead.
      if (this.source && this.source.readyState === EventSource.CLOSED) {
        this.source = null;
        this.poll();
      }
    };
  }

  dispatch(type, raw) {
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
    this.stopPolling();
  }
}
