//! The consumers every Z29C process runs, so a caller builds the standard publisher in one
//! line: `Publisher::new(pool, outbox::consumers(webhook))`.

use crate::outbox::consumer::Consumer;
use crate::outbox::projections::{MetricsProjection, NotificationCandidates, StatusProjection};
use crate::outbox::webhook::Webhook;

/// The consumers every Z29C process runs: the status projection, the metrics projection,
/// notification candidates, and (with a URL) the alert webhook. Each event reaches them in
/// this order.
pub fn consumers(webhook: Option<String>) -> Vec<Box<dyn Consumer>> {
    let mut consumers: Vec<Box<dyn Consumer>> = vec![
        Box::new(StatusProjection),
        Box::new(MetricsProjection),
        Box::new(NotificationCandidates),
    ];
    if let Some(url) = webhook {
        consumers.push(Box::new(Webhook::new(url)));
    }
    consumers
}
