// Without the events stream the page polls the Board; the review pickups and fix runs the
// stream tells (`review`, `fix_run` frames, docs/api.md) are then read from the task JSON:
// a card whose task has an event newer than the last one told (the Board's `last_event`)
// has its event log fetched, and each `review_pickup` or `ci_fix_run` event after the last
// one seen becomes the stream's frame, once. Everything else a card shows (state, ledger
// counts, pull request state, question) comes with the Board itself: a card that moved with
// no new event (a review thread declined on its ledger, a pull request's state) is not read.
const NEWS_KINDS = { review_pickup: "review", ci_fix_run: "fix_run" };

export class PolledNews {
  constructor() {
    // Per task: what its card showed last (`stamp`), and the point in its event log up to
    // which everything was told (`since`: a time before the log was first read, an id after).
    this.marks = new Map();
  }

  // What the Board showed when the page loaded is not news.
  remember(tasks) {
    for (const task of tasks) this.marks.set(task.id, { stamp: stamp(task), since: { at: micros(task.last_event?.at) } });
  }

  // The tasks whose card changed since the last look (a task first seen now is new since
  // the page loaded).
  moved(tasks) {
    const found = [];
    for (const task of tasks) {
      const mark = this.marks.get(task.id);
      const now = stamp(task);
      if (mark?.stamp === now) continue;
      this.marks.set(task.id, { stamp: now, since: mark?.since ?? { at: -Infinity } });
      found.push(task);
    }
    return found;
  }

  // Whether the task has an event after the last one told: only then can its log hold news.
  unread(task) {
    const since = this.marks.get(task.id)?.since ?? { at: -Infinity };
    return micros(task.last_event?.at) > since.at;
  }

  // The log could not be read: look again at the next poll.
  retry(taskId) {
    const mark = this.marks.get(taskId);
    if (mark) mark.stamp = null;
  }

  // The stream's frames for a moved task's events not told yet, oldest first.
  news(detail) {
    const mark = this.marks.get(detail.id) ?? { stamp: null, since: { at: -Infinity } };
    const events = detail.events || [];
    const { since } = mark;
    const fresh = events.filter((e) => (since.id !== undefined ? e.id > since.id : micros(e.at) > since.at));
    mark.since = {
      id: Math.max(since.id ?? 0, ...events.map((e) => e.id)),
      at: Math.max(since.at, ...events.map((e) => micros(e.at))),
    };
    this.marks.set(detail.id, mark);
    return fresh.filter((e) => NEWS_KINDS[e.kind]).map((e) => ({ type: NEWS_KINDS[e.kind], frame: asFrame(detail, e) }));
  }
}

function stamp(task) {
  const last = task.last_event;
  return [task.state, task.updated_at, last?.kind, last?.at, task.pr_state, task.review?.summary].join("|");
}

// The same fields as the stream's ReviewFrame and FixRunFrame (bot/contracts/events.py).
function asFrame(detail, event) {
  const data = event.data || {};
  if (NEWS_KINDS[event.kind] === "review") {
    return {
      task_id: detail.id,
      repo: detail.repo,
      issue: detail.issue,
      pr_number: detail.pr_number,
      pr_url: detail.pr_url,
      threads: (data.threads || []).map(String),
      at: event.at,
    };
  }
  return {
    task_id: detail.id,
    pr_number: Number(data.pr_number || 0),
    head_sha: String(data.head_sha || ""),
    checks: (data.checks || []).map(String),
    run: Number(data.fix_run || 0),
    of: Number(data.fix_runs || 0),
  };
}

// An ISO time in microseconds: the server's times carry six decimals, and events written
// in the same millisecond must still order.
function micros(iso) {
  if (!iso) return -Infinity;
  const fraction = /\.(\d+)/.exec(iso)?.[1] ?? "";
  const ms = Date.parse(iso.replace(/\.\d+/, ""));
  return Number.isNaN(ms) ? -Infinity : ms * 1000 + Number(fraction.padEnd(6, "0").slice(0, 6));
}
