//! The adapters this process may call: one HTTP adapter per registered destination, trusted
//! only once its contract suite passed against the live destination (docs/DESIGN.md §5).

use std::collections::HashMap;
use std::sync::Arc;

use sqlx::PgPool;

use super::contract_suite::{self, SuiteReport};
use super::{Adapter, BoxFuture};
use crate::store::adapter as adapter_store;

#[derive(Clone, Default)]
pub struct Adapters {
    by_name: HashMap<String, (Arc<dyn Adapter>, i32)>,
}

/// Why [`Adapters::load_verified`] refused the registered adapters.
#[derive(Debug, thiserror::Error)]
pub enum AdapterRefused {
    /// The adapter registry could not be read.
    #[error(transparent)]
    Sqlx(#[from] sqlx::Error),
    /// At least one adapter's contract suite failed against its live destination.
    #[error("{}; refusing to start", failure_clauses(.reports))]
    ContractFailed {
        /// The failed suites, by adapter name.
        reports: Vec<SuiteReport>,
    },
}

fn failure_clauses(reports: &[SuiteReport]) -> String {
    reports
        .iter()
        .map(SuiteReport::failure_clause)
        .collect::<Vec<_>>()
        .join("; ")
}

impl Adapters {
    /// HTTP adapters for every registered adapter, each trusted only once its contract suite
    /// passed against its live destination (docs/DESIGN.md §5). The suites run
    /// concurrently and make real, labelled probe deliveries; one failure refuses them all.
    pub async fn load_verified(pool: &PgPool) -> Result<Self, AdapterRefused> {
        let adapters = Self::load(pool).await?;
        let suites: Vec<BoxFuture<'_, SuiteReport>> = adapters
            .by_name
            .iter()
            .map(|(name, (adapter, _))| {
                Box::pin(contract_suite::verify(name, adapter.as_ref())) as BoxFuture<'_, _>
            })
            .collect();
        let mut reports = contract_suite::join_all(suites).await;
        reports.sort_by(|a, b| a.adapter.cmp(&b.adapter));
        for report in &reports {
            if report.passed() {
                tracing::info!(adapter = %report.adapter, checks = report.checks.len(), "contract suite passed");
            } else {
                tracing::error!(adapter = %report.adapter, summary = %report.summary(), "contract suite failed");
            }
        }
        reports.retain(|r| !r.passed());
        if reports.is_empty() {
            Ok(adapters)
        } else {
            Err(AdapterRefused::ContractFailed { reports })
        }
    }

    /// HTTP adapters for every registered adapter, without running their contract suites: for
    /// tests and tools whose destinations were verified elsewhere.
    pub async fn load<'e, E>(executor: E) -> sqlx::Result<Self>
    where
        E: sqlx::Executor<'e, Database = sqlx::Postgres>,
    {
        let mut adapters = Self::default();
        for row in adapter_store::all(executor).await? {
            let adapter = match &row.source {
                // Applied from a file: built from it, trusted with the stored contract.
                Some(source) => match super::apply::build(source) {
                    Ok(adapter) => adapter.with_contract(row.contract),
                    Err(error) => {
                        // Its steps wait (`UnknownAdapter`) until the secret is set here.
                        tracing::error!(adapter = %row.name, %error, "adapter not loaded");
                        continue;
                    }
                },
                // Registered with `z29c adapter add`: the destination protocol's files.
                None => super::protocol::protocol_adapter(&row.base_url, &row.contract),
            };
            adapters.insert(row.name, Arc::new(adapter), row.contract_version);
        }
        Ok(adapters)
    }

    /// Adds (or replaces) an adapter under `name`.
    pub fn insert(&mut self, name: String, adapter: Arc<dyn Adapter>, contract_version: i32) {
        self.by_name.insert(name, (adapter, contract_version));
    }

    /// The adapter registered as `name`, with its contract version.
    pub fn get(&self, name: &str) -> Option<(Arc<dyn Adapter>, i32)> {
        self.by_name.get(name).map(|(a, v)| (a.clone(), *v))
    }
}
