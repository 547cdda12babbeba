//! What PostgreSQL counted while a bench ran: statements, commits, rows written and index
//! entries, read from its cumulative statistics before and after.
//!
//! A backend publishes its counts when it goes idle (at most once a second) and when it exits,
//! so a [`Snapshot`] is taken only after every connection that did the work has closed, through
//! a connection of its own.

use sqlx::Connection;
use sqlx::postgres::PgConnection;

/// Statements the bench itself runs while it watches carry this marker, so they are not
/// counted as the system's.
pub(super) const WATCH: &str = "/* bench-watch */";

/// Cumulative counts of one database at one moment.
#[derive(Debug, Clone, Default)]
pub(super) struct Snapshot {
    /// Statements by `pg_stat_statements` (`BEGIN` and `COMMIT` included), or `None` when the
    /// server does not load it.
    pub statements: Option<i64>,
    pub commits: i64,
    /// Rows inserted, updated and deleted, in every table.
    pub rows_written: i64,
    /// Updates, and how many of them were HOT (no index entry written).
    pub updates: i64,
    pub hot_updates: i64,
    /// Index entries written: every inserted row and every non-HOT update writes one per index
    /// of its table (partial indexes make this an upper bound).
    pub index_entries: i64,
    /// Rows inserted, updated and deleted, by table.
    pub tables: std::collections::BTreeMap<String, i64>,
}

impl Snapshot {
    /// Reads the counts through a fresh connection to `url`.
    pub(super) async fn take(url: &str) -> anyhow::Result<Self> {
        let mut conn = PgConnection::connect(url).await?;
        let statements: Option<i64> = sqlx::query_scalar(&format!(
            "{WATCH} select sum(calls)::bigint from pg_stat_statements
              where dbid = (select oid from pg_database where datname = current_database())
                and query not like '%bench-watch%'"
        ))
        .fetch_one(&mut conn)
        .await
        .ok()
        .flatten();
        let commits: i64 = sqlx::query_scalar(&format!(
            "{WATCH} select xact_commit::bigint from pg_stat_database where datname = current_database()"
        ))
        .fetch_one(&mut conn)
        .await?;
        let (rows_written, updates, hot_updates, index_entries): (i64, i64, i64, i64) =
            sqlx::query_as(&format!(
                "{WATCH} select coalesce(sum(t.n_tup_ins + t.n_tup_upd + t.n_tup_del), 0)::bigint,
                        coalesce(sum(t.n_tup_upd), 0)::bigint,
                        coalesce(sum(t.n_tup_hot_upd), 0)::bigint,
                        coalesce(sum((t.n_tup_ins + t.n_tup_upd - t.n_tup_hot_upd)
                            * (select count(*) from pg_index i where i.indrelid = t.relid)), 0)::bigint
                 from pg_stat_user_tables t"
            ))
            .fetch_one(&mut conn)
            .await?;
        let tables: Vec<(String, i64)> = sqlx::query_as(&format!(
            "{WATCH} select relname::text, (n_tup_ins + n_tup_upd + n_tup_del)::bigint
               from pg_stat_user_tables"
        ))
        .fetch_all(&mut conn)
        .await?;
        conn.close().await?;
        Ok(Self {
            tables: tables.into_iter().collect(),
            statements,
            commits,
            rows_written,
            updates,
            hot_updates,
            index_entries,
        })
    }

    /// What happened between `self` and `later`.
    pub(super) fn until(self, later: Self) -> Self {
        let tables = later
            .tables
            .iter()
            .map(|(table, rows)| {
                let before = self.tables.get(table).copied().unwrap_or_default();
                (table.clone(), rows - before)
            })
            .filter(|(_, rows)| *rows != 0)
            .collect();
        Self {
            tables,
            statements: self
                .statements
                .zip(later.statements)
                .map(|(before, after)| after - before),
            commits: later.commits - self.commits,
            rows_written: later.rows_written - self.rows_written,
            updates: later.updates - self.updates,
            hot_updates: later.hot_updates - self.hot_updates,
            index_entries: later.index_entries - self.index_entries,
        }
    }
}
