//! The review queue's kept counts (migration `queue_counts`): whatever writes the steps, the
//! counts the console shows above the queue are the rows the queue lists.

use std::collections::BTreeMap;

use engine::read::queue::{QueueCounts, QueueFilter, queue, queue_counts};
use sqlx::PgPool;

/// The queue's rows counted by state and by adapter, as `queue_counts` reports them.
async fn listed(pool: &PgPool) -> QueueCounts {
    let rows = queue(pool, &QueueFilter::default(), None, 100_000)
        .await
        .unwrap();
    let (mut by_state, mut by_adapter) = (BTreeMap::new(), BTreeMap::new());
    for row in rows {
        *by_state.entry(row.state).or_insert(0) += 1;
        *by_adapter
            .entry(row.adapter.unwrap_or_default())
            .or_insert(0) += 1;
    }
    QueueCounts {
        by_state: by_state.into_iter().collect(),
        by_adapter: by_adapter.into_iter().collect(),
    }
}

/// 600 workflows of three steps, each external step with one of two adapters, all succeeded.
async fn settled_history(pool: &PgPool) {
    for name in ["mail", "sms"] {
        let contract = engine::adapter::contracts::declared(
            engine::domain::ContractKind::Queryable,
            1_000,
            1_500,
            false,
        );
        engine::adapter::apply::register_trusted(pool, name, "http://127.0.0.1:9", &contract)
            .await
            .unwrap();
    }
    for sql in [
        "insert into workflow (id, creation_key, definition_name, definition_version, input, input_digest, state, settled_at)
         select gen_random_uuid(), 'k-' || i, 'document_delivery', 1, '{}', 'sha256:' || repeat('0', 64), 'completed', now()
         from generate_series(1, 600) i",
        "insert into step (id, workflow_id, logical, definition_version, kind, adapter, state, output, receipt_id)
         select gen_random_uuid(), w.id, l.logical, 1, l.kind::step_kind,
                case when l.kind = 'external' then (array['mail', 'sms'])[1 + abs(hashtext(w.creation_key)) % 2] end,
                'succeeded', '{}', case when l.kind = 'external' then gen_random_uuid() end
         from workflow w, (values ('render', 'pure'), ('deliver', 'external'), ('notify', 'external')) l(logical, kind)",
    ] {
        sqlx::query(sql).execute(pool).await.unwrap();
    }
}

#[sqlx::test(migrator = "engine::db::MIGRATOR")]
async fn the_queues_kept_counts_are_the_rows_it_lists_through_arrivals_replacements_and_removals(
    pool: PgPool,
) {
    settled_history(&pool).await;
    assert_eq!(queue_counts(&pool).await.unwrap(), QueueCounts::default());
    let waiting = "request_key = 'rk-' || id, unknown_since = now() - interval '1 hour'";
    for sql in [
        // Steps start waiting, one statement each state.
        format!("update step set state = 'outcome_unknown', {waiting} where id in (select id from step where logical = 'deliver' order by id limit 90)"),
        format!("update step set state = 'review_required', {waiting} where id in (select id from step where logical = 'notify' order by id limit 40)"),
        format!("update step set state = 'rejected', {waiting} where id in (select id from step where logical = 'notify' and state = 'succeeded' order by id limit 30)"),
        format!("update step set state = 'unsent', {waiting} where id in (select id from step where logical = 'render' order by id limit 5)"),
        // A waiting step moves between states and adapters; unrelated columns change.
        "update step set state = 'review_required' where id in (select id from step where state = 'outcome_unknown' order by id limit 10)".into(),
        "update step set adapter = 'sms' where id in (select id from step where state = 'review_required' and adapter = 'mail' order by id limit 7)".into(),
        "update step set attempt_count = attempt_count + 1 where waiting is not null".into(),
        // Rejected steps are replaced, two of them in one statement: they leave the queue.
        "insert into step (id, workflow_id, logical, definition_version, generation, kind, adapter, state, replaces_step_id)
         select gen_random_uuid(), workflow_id, logical, 1, generation + 1, kind, adapter, 'ready', id
         from step where state = 'rejected' order by id limit 12".into(),
        // A replaced step's own changes no longer count, nor does a replacement that starts waiting.
        "update step set state = 'cancelled' where id in (select replaces_step_id from step where replaces_step_id is not null order by id limit 4)".into(),
        format!("update step set state = 'outcome_unknown', {waiting} where id in (select id from step where replaces_step_id is not null order by id limit 3)"),
        // Waiting steps settle, or are cancelled.
        "update step set state = 'succeeded', receipt_id = gen_random_uuid() where id in (select id from step where state = 'outcome_unknown' order by id limit 25)".into(),
        "update step set state = 'cancelled' where id in (select id from step where state = 'unsent' order by id limit 2)".into(),
        // Workflows leave the hot tables, a replaced step and its replacement together, as the
        // archiver deletes a workflow's steps in one statement.
        "delete from step where workflow_id in (select workflow_id from step where replaces_step_id is not null order by id limit 5)".into(),
        "delete from step where workflow_id in (select workflow_id from step where state = 'review_required' order by id limit 6)".into(),
    ] {
        sqlx::query(&sql).execute(&pool).await.unwrap();
        let listed = listed(&pool).await;
        assert!(!listed.by_state.is_empty(), "the queue holds steps after {sql}");
        assert_eq!(queue_counts(&pool).await.unwrap(), listed, "after {sql}");
    }
    let unfolded: i64 = sqlx::query_scalar("select count(*) from step_waiting_delta")
        .fetch_one(&pool)
        .await
        .unwrap();
    assert_eq!(unfolded, 0, "a read leaves the changes folded");
}

#[sqlx::test(migrator = "engine::db::MIGRATOR")]
async fn a_read_while_another_folds_leaves_the_changes_to_it_and_counts_them_once(pool: PgPool) {
    settled_history(&pool).await;
    sqlx::query("update step set state = 'review_required', request_key = 'rk-' || id, unknown_since = now() where id in (select id from step where logical = 'deliver' order by id limit 12)")
        .execute(&pool)
        .await
        .unwrap();
    let unfolded = || async {
        sqlx::query_scalar::<_, i64>("select count(*) from step_waiting_delta")
            .fetch_one(&pool)
            .await
            .unwrap()
    };
    assert!(unfolded().await > 0);

    // Another reader holds the fold's turn: this read folds nothing and counts the changes.
    let mut other = pool.begin().await.unwrap();
    sqlx::query("select pg_advisory_xact_lock(2912160301)")
        .execute(&mut *other)
        .await
        .unwrap();
    let counted = queue_counts(&pool).await.unwrap();
    assert_eq!(counted, listed(&pool).await);
    assert_eq!(counted.by_state.iter().map(|(_, n)| n).sum::<i64>(), 12);
    assert!(
        unfolded().await > 0,
        "the changes are left to the reader folding"
    );

    other.rollback().await.unwrap();
    assert_eq!(queue_counts(&pool).await.unwrap(), counted);
    assert_eq!(unfolded().await, 0, "the next read folds them");
}
