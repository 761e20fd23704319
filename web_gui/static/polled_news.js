// Without the events stream the page polls the Board, whose list carries everything a card
// shows and the news the stream would have told: each task's latest review pickup and fix
// run (`review_pickup`, `fix_run`, docs/api.md), worded as the stream's `review` and
// `fix_run` frames. One whose event is newer than the last one told for its task becomes
// that frame, once; nothing is read per task (tests/browser/test_gui_poll_reads.py). Two
// fix runs (or two review pickups) of one task between two polls tell the later one only.
export class PolledNews {
  constructor() {
    // Per task: what its card showed last, and the newest news event told (its id).
    this.stamps = new Map();
    this.told = new Map();
  }

  // What the Board showed when the page loaded is not news.
  remember(tasks) {
    for (const task of tasks) {
      this.stamps.set(task.id, stamp(task));
      this.told.set(task.id, newest(task));
    }
  }

  // The tasks whose card changed since the last look (a task first seen now is new since
  // the page loaded).
  moved(tasks) {
    const found = [];
    for (const task of tasks) {
      const now = stamp(task);
      if (this.stamps.get(task.id) === now) continue;
      this.stamps.set(task.id, now);
      found.push(task);
    }
    return found;
  }

  // The stream's frames for the task's news not told yet, oldest first.
  news(task) {
    const since = this.told.get(task.id) ?? 0; // a task first seen now: all of it is news
    this.told.set(task.id, Math.max(since, newest(task)));
    const fresh = [];
    const pickup = task.review_pickup;
    if (pickup && pickup.event_id > since) fresh.push({ type: "review", id: pickup.event_id, frame: reviewFrame(task, pickup) });
    const run = task.fix_run;
    if (run && run.event_id > since) fresh.push({ type: "fix_run", id: run.event_id, frame: fixRunFrame(task, run) });
    return fresh.sort((a, b) => a.id - b.id);
  }
}

function stamp(task) {
  const last = task.last_event;
  return [task.state, task.updated_at, last?.kind, last?.at, task.pr_state, task.review?.summary].join("|");
}

function newest(task) {
  return Math.max(0, task.review_pickup?.event_id ?? 0, task.fix_run?.event_id ?? 0);
}

// The stream's ReviewFrame and FixRunFrame (bot/contracts/events.py), as far as the
// notifications and the card read them.
function reviewFrame(task, pickup) {
  return {
    task_id: task.id,
    repo: task.repo,
    issue: task.issue,
    pr_url: task.pr_url,
    threads: pickup.threads.map(String),
    at: pickup.at,
  };
}

function fixRunFrame(task, run) {
  return {
    task_id: task.id,
    pr_number: run.pr_number,
    head_sha: run.head_sha,
    checks: run.checks.map(String),
    run: run.run,
    of: run.of,
  };
}
