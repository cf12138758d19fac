//! The circuit breaker for spawn failures (docs/tools.md, "Bounded execution").
//!
//! `failures` consecutive spawn failures for lack of resources (`EAGAIN`,
//! `ENOMEM`, `EMFILE`, `ENFILE`: the machine, the container or the server's
//! limits are exhausted) open the breaker: for `cooldown`, new jobs fail at
//! once with a start error that says why, instead of each one hammering a
//! kernel that has nothing to give. After the cooldown the next spawn is
//! tried (half-open): a success closes the breaker, another resource failure
//! opens it again at once. Failures of a job itself (a missing program or
//! directory) neither count nor reset the count.
//!
//! State lives behind one short mutex; no lock is held across a spawn.

use std::sync::Mutex;
use std::time::Duration;

use tokio::time::Instant;

/// The breaker.
#[derive(Debug)]
pub struct Breaker {
    failures: u32,
    cooldown: Duration,
    state: Mutex<BreakerState>,
}

#[derive(Debug, Default)]
struct BreakerState {
    consecutive: u32,
    open_until: Option<Instant>,
    last_error: String,
}

impl Breaker {
    /// A closed breaker that opens after `failures` consecutive resource
    /// failures (0 = never) for `cooldown`.
    pub fn new(failures: u32, cooldown: Duration) -> Breaker {
        Breaker {
            failures,
            cooldown,
            state: Mutex::default(),
        }
    }

    /// A breaker that is open for good: every job fails to start with
    /// `why`, and nothing is ever spawned (the fuzz facade's job service).
    pub fn refusing(why: &str) -> Breaker {
        // A century from now; `checked_add` because an `Instant` cannot hold
        // every sum, and then a year still outlasts any fuzzing run.
        let now = Instant::now();
        let until = [100 * 365, 365]
            .into_iter()
            .find_map(|days| now.checked_add(Duration::from_secs(days * 86_400)));
        Breaker {
            failures: 0,
            cooldown: Duration::ZERO,
            state: Mutex::new(BreakerState {
                consecutive: 0,
                open_until: until,
                last_error: why.to_owned(),
            }),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, BreakerState> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// `Ok` when a spawn may be tried; the start error text otherwise.
    pub fn check(&self) -> Result<(), String> {
        let state = self.lock();
        match state.open_until {
            Some(until) if Instant::now() < until => Err(format!(
                "refusing new jobs for {} s after {} consecutive spawn failures for lack of resources (last: {})",
                self.cooldown.as_secs_f64(),
                state.consecutive,
                state.last_error
            )),
            _ => Ok(()),
        }
    }

    /// Whether it refuses jobs now.
    pub fn is_open(&self) -> bool {
        self.lock()
            .open_until
            .is_some_and(|until| Instant::now() < until)
    }

    /// Records a failed spawn.
    pub fn failed(&self, error: &init::SpawnError) {
        if !error.lacks_resources() || self.failures == 0 {
            return;
        }
        let mut state = self.lock();
        state.consecutive = state.consecutive.saturating_add(1);
        state.last_error = error.to_string();
        let half_open = state.open_until.is_some();
        if state.consecutive >= self.failures || half_open {
            state.open_until = Some(Instant::now() + self.cooldown);
            tracing::warn!(
                failures = state.consecutive,
                cooldown_s = self.cooldown.as_secs_f64(),
                error = %state.last_error,
                "spawns keep failing for lack of resources: refusing new jobs for a while"
            );
        }
    }

    /// Records a successful spawn: the breaker closes.
    pub fn succeeded(&self) {
        let mut state = self.lock();
        if state.consecutive != 0 || state.open_until.is_some() {
            *state = BreakerState::default();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn eagain() -> init::SpawnError {
        init::SpawnError::Pipe(std::io::Error::from_raw_os_error(
            rustix::io::Errno::AGAIN.raw_os_error(),
        ))
    }

    #[tokio::test(flavor = "current_thread", start_paused = true)]
    async fn consecutive_resource_failures_open_it_for_the_cooldown_and_a_success_closes_it() {
        let b = Breaker::new(3, Duration::from_secs(10));
        for _ in 0..2 {
            b.failed(&eagain());
            assert!(b.check().is_ok());
        }
        b.failed(&eagain());
        let refusal = b.check().unwrap_err();
        assert!(
            refusal.contains("refusing new jobs")
                && refusal.contains("3 consecutive spawn failures")
        );
        assert!(b.is_open());
        tokio::time::advance(Duration::from_secs(11)).await;
        assert!(b.check().is_ok(), "half-open after the cooldown");
        b.failed(&eagain());
        assert!(b.is_open(), "one more failure when half-open reopens it");
        tokio::time::advance(Duration::from_secs(11)).await;
        b.succeeded();
        assert!(!b.is_open());
        b.failed(&eagain());
        assert!(b.check().is_ok(), "the count started over");
    }

    #[test]
    fn failures_of_the_job_itself_do_not_count() {
        let b = Breaker::new(1, Duration::from_secs(10));
        b.failed(&init::SpawnError::Chdir {
            path: "/nope".into(),
            reason: "no such file or directory".into(),
        });
        assert!(b.check().is_ok());
    }
}
