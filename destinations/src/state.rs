//! What every request handler of a destination shares, whatever its API.

use std::sync::Arc;

use sqlx::PgPool;
use tokio::sync::broadcast;

use crate::config::Config;
use crate::ledger::Effect;
use crate::script::Faults;

/// How many committed effects a slow [`crate::RunningDestination::effects`] subscriber may
/// fall behind before it misses some.
const EFFECT_BACKLOG: usize = 1024;

/// Everything a request handler needs.
#[derive(Clone, Debug)]
pub(crate) struct AppState {
    pub pool: PgPool,
    pub config: Arc<Config>,
    pub faults: Faults,
    pub effects: broadcast::Sender<Effect>,
}

impl AppState {
    pub fn new(pool: PgPool, config: Config) -> Self {
        AppState {
            pool,
            config: Arc::new(config),
            faults: Faults::default(),
            effects: broadcast::channel(EFFECT_BACKLOG).0,
        }
    }

    pub fn publish(&self, effect: Effect) {
        // Nobody may be listening; the database, not this channel, is the truth.
        let _ = self.effects.send(effect);
    }
}

/// Marks a response that must never be sent: the server closes the connection instead.
#[derive(Clone, Copy, Debug)]
pub(crate) struct DropConnection;
