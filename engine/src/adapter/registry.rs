//! The adapters this process may call: one HTTP adapter per registered adapter, built from its
//! current version's file and acting on what verification proved of it (docs/DESIGN.md §5).

use std::collections::HashMap;
use std::sync::Arc;

use super::Adapter;
use crate::store::adapter as adapter_store;

/// One registered adapter as this process holds it.
#[derive(Clone)]
pub struct Loaded {
    pub adapter: Arc<dyn Adapter>,
    /// The version it was built from.
    pub version: i32,
    /// Whether that version passed verification: only then does it send anything.
    pub may_send: bool,
}

#[derive(Clone, Default)]
pub struct Adapters {
    by_name: HashMap<String, Loaded>,
}

impl Adapters {
    /// An HTTP adapter for every registered adapter, with the contract and the rules its
    /// current version's verification proved. An adapter whose file does not build here (a
    /// secret not set in this process) is left out, and logged: its steps wait.
    pub async fn load<'e, E>(executor: E) -> sqlx::Result<Self>
    where
        E: sqlx::Executor<'e, Database = sqlx::Postgres>,
    {
        let rows = adapter_store::all(executor).await?;
        // Building reads secret files: on a blocking thread, never on an async one.
        Ok(tokio::task::spawn_blocking(move || Self::built(rows))
            .await
            .unwrap_or_default())
    }

    fn built(rows: Vec<adapter_store::AdapterRow>) -> Self {
        let mut adapters = Self::default();
        for row in rows {
            let may_send = row.may_send();
            let adapter = match &row.source {
                Some(source) => match super::apply::build(source) {
                    Ok(adapter) => adapter,
                    Err(error) => {
                        tracing::error!(adapter = %row.name, %error, "adapter not loaded");
                        continue;
                    }
                },
                // Registered before adapters were files: the destination protocol's.
                None => super::protocol::protocol_adapter(&row.base_url, &row.contract),
            };
            let adapter = adapter.with_trust(row.contract, row.verified);
            adapters.by_name.insert(
                row.name,
                Loaded {
                    adapter: Arc::new(adapter),
                    version: row.contract_version,
                    may_send,
                },
            );
        }
        adapters
    }

    /// Adds (or replaces) an adapter under `name`, as one that may send.
    pub fn insert(&mut self, name: String, adapter: Arc<dyn Adapter>, contract_version: i32) {
        self.by_name.insert(
            name,
            Loaded {
                adapter,
                version: contract_version,
                may_send: true,
            },
        );
    }

    /// The adapter registered as `name`, with its contract version.
    pub fn get(&self, name: &str) -> Option<(Arc<dyn Adapter>, i32)> {
        self.by_name
            .get(name)
            .map(|l| (l.adapter.clone(), l.version))
    }

    /// The adapter registered as `name`, as this process holds it.
    pub fn loaded(&self, name: &str) -> Option<&Loaded> {
        self.by_name.get(name)
    }
}
