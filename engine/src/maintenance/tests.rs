use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use super::*;

/// Counts its turns (and the turns it finished); each turn may take `takes` and may fail.
struct Counting {
    every: Duration,
    first_after: Duration,
    takes: Duration,
    fails: bool,
    started: Arc<AtomicUsize>,
    finished: Arc<AtomicUsize>,
    wake: Arc<tokio::sync::Notify>,
}

impl Counting {
    fn every(every: Duration) -> Self {
        Self {
            every,
            first_after: Duration::ZERO,
            takes: Duration::ZERO,
            fails: false,
            started: Arc::default(),
            finished: Arc::default(),
            wake: Arc::default(),
        }
    }
}

impl Service for Counting {
    fn name(&self) -> &'static str {
        "counting"
    }

    fn every(&self) -> Duration {
        self.every
    }

    fn first_after(&self) -> Duration {
        self.first_after
    }

    fn turn(&mut self) -> BoxFuture<'_, Result<Pace, Failure>> {
        Box::pin(async move {
            self.started.fetch_add(1, Ordering::SeqCst);
            tokio::time::sleep(self.takes).await;
            self.finished.fetch_add(1, Ordering::SeqCst);
            if self.fails {
                return Err("the database is restarting".into());
            }
            Ok(Pace::Interval)
        })
    }

    fn woken(&mut self) -> BoxFuture<'_, ()> {
        let wake = self.wake.clone();
        Box::pin(async move { wake.notified().await })
    }
}

fn short() -> Duration {
    Duration::from_millis(20)
}

#[tokio::test]
async fn a_service_turns_at_its_pace_until_stopped_and_never_after() {
    let service = Counting::every(short());
    let turns = service.started.clone();
    let services = Services::start(vec![Box::new(service)]);
    assert_eq!(services.names(), vec!["counting"]);
    tokio::time::sleep(Duration::from_millis(300)).await;
    services.stop().await;
    let stopped_at = turns.load(Ordering::SeqCst);
    assert!(stopped_at >= 3, "only {stopped_at} turns in 15 intervals");
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert_eq!(turns.load(Ordering::SeqCst), stopped_at);
}

#[tokio::test]
async fn a_failed_turn_is_followed_by_the_next_at_the_usual_pace() {
    let mut service = Counting::every(short());
    service.fails = true;
    let turns = service.started.clone();
    let services = Services::start(vec![Box::new(service)]);
    tokio::time::sleep(Duration::from_millis(300)).await;
    services.stop().await;
    assert!(turns.load(Ordering::SeqCst) >= 3);
}

#[tokio::test]
async fn stopping_lets_the_turn_under_way_finish_and_starts_no_other() {
    let mut service = Counting::every(Duration::ZERO);
    service.takes = Duration::from_millis(150);
    let (started, finished) = (service.started.clone(), service.finished.clone());
    let services = Services::start(vec![Box::new(service)]);
    tokio::time::sleep(Duration::from_millis(50)).await;
    services.stop().await;
    assert_eq!(started.load(Ordering::SeqCst), 1);
    assert_eq!(finished.load(Ordering::SeqCst), 1, "the turn was cut short");
}

#[tokio::test]
async fn the_first_turn_waits_as_the_service_asks_and_a_wake_up_comes_before_the_interval() {
    let mut service = Counting::every(Duration::from_secs(3_600));
    service.first_after = Duration::from_secs(3_600);
    let (turns, wake) = (service.started.clone(), service.wake.clone());
    let services = Services::start(vec![Box::new(service)]);
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert_eq!(
        turns.load(Ordering::SeqCst),
        0,
        "turned before its first_after"
    );
    wake.notify_one();
    for _ in 0..50 {
        if turns.load(Ordering::SeqCst) == 1 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(
        turns.load(Ordering::SeqCst),
        1,
        "the wake-up did not bring a turn"
    );
    services.stop().await;
}

#[tokio::test]
async fn a_periodic_job_runs_once_a_turn_and_keeps_its_first_delay() {
    let runs = Arc::new(AtomicUsize::new(0));
    let counted = runs.clone();
    let mut service = Periodic::new(
        "periodic",
        short(),
        move || -> BoxFuture<'static, Result<(), Failure>> {
            counted.fetch_add(1, Ordering::SeqCst);
            Box::pin(std::future::ready(Ok(())))
        },
    )
    .starting_after(Duration::from_secs(60));
    assert_eq!(
        (service.name(), service.every(), service.first_after()),
        ("periodic", short(), Duration::from_secs(60))
    );
    assert_eq!(service.turn().await.unwrap(), Pace::Interval);
    assert_eq!(service.turn().await.unwrap(), Pace::Interval);
    assert_eq!(runs.load(Ordering::SeqCst), 2);
}
