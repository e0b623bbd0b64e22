//! The console's bulk jobs (`redrive`, `events redrive`, `resend`): what each would move,
//! counted first; one at a time, in the background, read back while it runs.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use hyper::StatusCode;
use paymos_inbox::counted;
use paymos_inbox_lambda::now_ms;
use serde_json::{Value, json};

use crate::stack::Stack;

use super::{Answered, Console, said};

/// A dead-letter queue the console moves back as a job, through the command line's
/// [`crate::ops::redrive_in`]: the action, the queue its audit entry names, the two queues'
/// options (as the command line names them) and where they are in the stack, the pace, and
/// whether a stack may lack both queues (not offered then).
#[derive(Clone, Copy)]
struct Redrive {
    action: &'static str,
    id: &'static str,
    names: (&'static str, &'static str),
    queues: fn(&Stack) -> (Option<String>, Option<String>),
    from_to: &'static str,
    per_second: Option<u16>,
    optional: bool,
}

/// `redrive` (the work queue's dead letters) and `events redrive` (the hand-off's parked
/// events, paced as the command line paces them by default).
const REDRIVES: [Redrive; 2] = [
    Redrive {
        action: "redrive",
        id: "work-queue",
        names: ("queue-url", "dlq-url"),
        queues: |s| (s.queue.clone(), s.dlq.clone()),
        from_to: "the dead-letter queue back to the work queue",
        per_second: None,
        optional: false,
    },
    Redrive {
        action: "events-redrive",
        id: "webhook-queue",
        names: ("webhook-queue-url", "webhook-dlq-url"),
        queues: |s| (s.webhook_queue.clone(), s.webhook_dlq.clone()),
        from_to: "the hand-off's dead-letter queue back to the queue the deliver function posts from",
        per_second: Some(crate::handoff::REDRIVE_PER_SECOND),
        // Only a stack with a `WebhookTargetUrl` has the hand-off's queues.
        optional: true,
    },
];

/// The most a job moves at once, and the most stranded deliveries it counts.
const JOB_LIMIT: usize = 1000;

/// The pace a person may choose for a redrive: SQS's move task's own bounds.
const PACE: std::ops::RangeInclusive<u16> = 1..=500;

/// A job started from the console: which, the count confirmed, how many have moved so far (as
/// the mover reports it), and how it ended: how many moved and its sentence, or its failure.
struct Job {
    action: &'static str,
    of: &'static str,
    count: usize,
    moved: AtomicUsize,
    ended: Mutex<Option<Result<(usize, String), String>>>,
}

impl Job {
    /// `{job, action, of, count, moved, done, result | error}`, as `GET /api/jobs/<id>` answers.
    fn view(&self, id: usize) -> Value {
        let mut view = json!({
            "job": id,
            "action": self.action,
            "of": self.of,
            "count": self.count,
            "moved": self.moved.load(Ordering::Relaxed),
            "done": false,
        });
        match &*lock(&self.ended) {
            None => {}
            Some(Ok((moved, sentence))) => {
                view["done"] = json!(true);
                view["moved"] = json!(moved);
                view["result"] = json!(sentence);
            }
            Some(Err(why)) => {
                view["done"] = json!(true);
                view["error"] = json!(why);
            }
        }
        view
    }
}

/// The jobs this console started (job `n` is `started[n - 1]`), and the one running, if any.
#[derive(Default)]
pub(super) struct Jobs {
    started: Vec<Arc<Job>>,
    running: Option<usize>,
}

/// A lock that a panicked holder did not spoil (what it guards is written whole, or not).
fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

impl Console {
    /// What each job would move, counted before anything moves: each dead-letter queue's
    /// messages (`redrive`, `events redrive`) and the stranded deliveries (`pending --resend`),
    /// by the reads those commands make.
    pub async fn jobs(&self) -> Answered {
        use paymos_inbox_core::roads::sweep::StrandedDeliveries as _;
        let mut jobs = serde_json::Map::new();
        for r in &REDRIVES {
            let (queue, dlq) = (r.queues)(&self.stack);
            if r.optional && queue.is_none() && dlq.is_none() {
                jobs.insert(r.action.to_owned(), Value::Null);
                continue;
            }
            let offer = match self.stack.require(&dlq, r.names.1) {
                Ok(dlq) if queue.is_some() => {
                    match paymos_inbox_aws::sqs::approximate_messages(&self.stack.sqs, dlq).await {
                        Ok(n) => {
                            let pace = r
                                .per_second
                                .map_or(String::new(), |p| format!(", at most {p} a second"));
                            json!({"count": n, "sentence": format!(
                                "{} will move from {}{pace}", counted(n, "message"), r.from_to
                            )})
                        }
                        Err(e) => json!({"unavailable": e.to_string()}),
                    }
                }
                Ok(_) => json!({"unavailable": self.stack.named_by.missing(r.names.0).message}),
                Err(f) => json!({"unavailable": f.message}),
            };
            jobs.insert(r.action.to_owned(), offer);
        }
        let now = now_ms();
        let after = paymos_inbox_core::roads::sweep::DEFAULT_SWEEP_AFTER_SECS;
        let resend = match self
            .ledger
            .stranded(now.saturating_sub(after * 1000), now, JOB_LIMIT)
            .await
        {
            Ok(found) => json!({"count": found.len(), "sentence": format!(
                "{} recorded over {} min ago and never processed will be sent to the work queue again",
                counted(found.len(), "delivery"),
                after / 60
            )}),
            Err(e) => json!({"unavailable": e.to_string()}),
        };
        jobs.insert("resend".to_owned(), resend);
        let running = {
            let all = lock(&self.jobs);
            all.running
                .map_or(Value::Null, |id| all.started[id - 1].view(id))
        };
        jobs.insert("running".to_owned(), running);
        Answered::ok(Value::Object(jobs))
    }

    /// Where a job this console started stands (`GET /api/jobs/<id>`).
    pub fn job(&self, id: &str) -> Answered {
        let all = lock(&self.jobs);
        match id
            .parse::<usize>()
            .ok()
            .filter(|n| (1..=all.started.len()).contains(n))
        {
            Some(n) => Answered::ok(all.started[n - 1].view(n)),
            None => Answered::refused(StatusCode::NOT_FOUND, format!("no job {id}")),
        }
    }

    /// A job started in the background, at most `count` moved (the count the person saw and
    /// confirmed), a redrive at `per_second` when given (else its command's pace): answered at
    /// once (202) with the job's id, or refused while another of this console's jobs runs.
    pub(super) fn start(
        self: &Arc<Self>,
        action: &str,
        count: Option<u64>,
        per_second: Option<u64>,
    ) -> Answered {
        let Some(count) = count
            .and_then(|n| usize::try_from(n).ok())
            .filter(|n| (1..=JOB_LIMIT).contains(n))
        else {
            return Answered::refused(
                StatusCode::BAD_REQUEST,
                format!("a job moves the count you confirmed: 1 to {JOB_LIMIT}"),
            );
        };
        let redrive = REDRIVES.iter().find(|r| r.action == action).copied();
        let pace = match (redrive, per_second) {
            (r, None) => r.and_then(|r| r.per_second),
            (Some(_), Some(n)) => match u16::try_from(n).ok().filter(|n| PACE.contains(n)) {
                Some(n) => Some(n),
                None => {
                    return Answered::refused(
                        StatusCode::BAD_REQUEST,
                        format!(
                            "a redrive's pace is {} to {} messages a second",
                            PACE.start(),
                            PACE.end()
                        ),
                    );
                }
            },
            (None, Some(_)) => {
                return Answered::refused(
                    StatusCode::BAD_REQUEST,
                    "pending --resend sends each stranded delivery at once: it takes no pace",
                );
            }
        };
        let (id, job) = {
            let mut all = lock(&self.jobs);
            if let Some(running) = all.running {
                return Answered::refused(
                    StatusCode::CONFLICT,
                    format!(
                        "job {running} ({}) is still running: this console runs one job at a time; start this one when it ends",
                        all.started[running - 1].action
                    ),
                );
            }
            let job = Arc::new(Job {
                action: redrive.map_or("resend", |r| r.action),
                of: redrive.map_or("stranded", |r| r.id),
                count,
                moved: AtomicUsize::new(0),
                ended: Mutex::new(None),
            });
            all.started.push(job.clone());
            let id = all.started.len();
            all.running = Some(id);
            (id, job)
        };
        let console = Arc::clone(self);
        let running = job.clone();
        tokio::spawn(async move {
            let work = {
                let (console, job) = (console.clone(), job.clone());
                tokio::spawn(async move { console.run(redrive, (count, pace), &job.moved).await })
            };
            let ended = work
                .await
                .unwrap_or_else(|e| Err(format!("the job stopped: {e}")));
            match &ended {
                Ok((moved, _)) => tracing::info!(job = id, moved, "console: job ended"),
                Err(why) => tracing::warn!(job = id, "console: job failed: {why}"),
            }
            let mut all = lock(&console.jobs);
            *lock(&job.ended) = Some(ended);
            all.running = None;
        });
        tracing::info!(
            job = id,
            action = running.action,
            count,
            "console: job started"
        );
        Answered {
            status: StatusCode::ACCEPTED,
            body: running.view(id),
        }
    }

    /// A job's work, through the command line's own functions (each writes its audit entry
    /// when it starts and its result when it ends): how many moved and its sentence, or its
    /// failure's.
    async fn run(
        &self,
        redrive: Option<Redrive>,
        (count, pace): (usize, Option<u16>),
        moved: &AtomicUsize,
    ) -> Result<(usize, String), String> {
        if let Some(r) = redrive {
            let done = crate::ops::redrive_in(
                &self.stack,
                r.names,
                r.queues,
                (count, pace),
                Some(&self.actor),
                Some(moved),
            )
            .await
            .map_err(|f| said(&f))?;
            Ok((
                done.moved(),
                format!(
                    "moved {} from {}",
                    counted(done.moved(), "message"),
                    r.from_to
                ),
            ))
        } else {
            let after = paymos_inbox_core::roads::sweep::DEFAULT_SWEEP_AFTER_SECS;
            let s = crate::ops::resend_in(
                &self.stack,
                &self.ledger,
                (after, count),
                Some(&self.actor),
                Some(moved),
            )
            .await
            .map_err(|f| said(&f))?;
            Ok((
                s.resent,
                format!(
                    "{} stranded, {} sent again, {} taken by someone else meanwhile, {} failed (try again), {} without a body (replay them from Paymos' dashboard)",
                    s.found, s.resent, s.skipped, s.failed, s.bodiless
                ),
            ))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_jobs_view_counts_what_moved_while_it_runs_then_says_how_it_ended() {
        let job = Job {
            action: "redrive",
            of: "work-queue",
            count: 3,
            moved: AtomicUsize::new(0),
            ended: Mutex::new(None),
        };
        job.moved.store(2, Ordering::Relaxed);
        let running = job.view(7);
        assert_eq!(
            running,
            json!({"job": 7, "action": "redrive", "of": "work-queue", "count": 3, "moved": 2,
                   "done": false})
        );
        *lock(&job.ended) = Some(Ok((3, "moved 3 messages".into())));
        let ended = job.view(7);
        assert_eq!((&ended["done"], &ended["moved"]), (&json!(true), &json!(3)));
        assert_eq!(ended["result"], "moved 3 messages");
        assert_eq!(ended["error"], Value::Null);
        *lock(&job.ended) = Some(Err("SendMessage: denied".into()));
        let failed = job.view(7);
        assert_eq!(
            (&failed["done"], &failed["moved"]),
            (&json!(true), &json!(2))
        );
        assert_eq!(failed["error"], "SendMessage: denied");
    }
}
