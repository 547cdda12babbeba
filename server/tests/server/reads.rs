//! What an anonymous or signed-in reader can make the server do: the `/metrics` scrape and the
//! overview read figures whose cost does not grow with the number of workflows (no sequential
//! scan of the big tables in any statement they run), the overview asks for a sign-in, and the
//! queue's filters refuse input out of range in a sentence.

use http::StatusCode;
use sqlx::PgPool;

use crate::console::{Browser, signed_in};
use crate::support::fixture;

/// The tables that grow with every workflow: no figure may read them whole.
const BIG_TABLES: [&str; 6] = [
    "step",
    "attempt_start",
    "observation",
    "workflow",
    "outbox",
    "archived_workflow",
];

/// The read modules whose every statement a scrape or an overview runs.
const READS: [(&str, &str); 2] = [
    (
        "engine/src/read/metrics.rs",
        include_str!("../../../engine/src/read/metrics.rs"),
    ),
    (
        "engine/src/read/stats.rs",
        include_str!("../../../engine/src/read/stats.rs"),
    ),
];

/// Every raw-string SQL statement in `source` (the read modules write each as `r#"…"#`).
fn statements(source: &str) -> Vec<String> {
    source
        .split("r#\"")
        .skip(1)
        .map(|rest| rest[..rest.find("\"#").expect("a closed raw string")].to_owned())
        .collect()
}

/// A database the size where the planner prefers a sequential scan for any statement no index
/// serves: thousands of finished workflows, each with a step, an attempt and published events,
/// a few steps still waiting, and fresh statistics.
async fn thousands_of_finished_workflows(pool: &PgPool) {
    for sql in [
        "insert into workflow (id, creation_key, definition_name, definition_version, input, input_digest, state, settled_at)
         select gen_random_uuid(), 'k-' || i, 'document_delivery', 1, '{}', 'sha256:' || repeat('0', 64), 'completed', now()
         from generate_series(1, 20000) i",
        "insert into step (id, workflow_id, logical, definition_version, kind, state, output)
         select gen_random_uuid(), id, (array['prepare', 'deliver', 'notify'])[1 + abs(hashtext(creation_key)) % 3],
                1, 'pure', 'succeeded', '{}'
         from workflow",
        "update step set state = 'outcome_unknown', request_key = 'rk-' || id, unknown_since = now()
         where id in (select id from step limit 20)",
        "insert into attempt_start (id, step_id, number, worker)
         select gen_random_uuid(), id, 1, 'w' from step",
        "insert into observation (step_id, attempt_id, kind, body, outcome)
         select step_id, id, 'transport', '{\"observed\": \"succeeded\"}', 'succeeded' from attempt_start",
        "insert into outbox (event_id, workflow_id, revision, kind, payload)
         select gen_random_uuid(), id, 1, 'workflow.started', '{}' from workflow",
        "analyze",
    ] {
        sqlx::query(sql).execute(pool).await.unwrap();
    }
}

/// The big tables `sql`'s plan reads whole: with a sequential scan, or through an index that
/// is not partial with no condition on it (a full index scan grows with the table too).
async fn whole_table_reads(conn: &mut sqlx::PgConnection, sql: &str) -> Vec<String> {
    // Each index: its name, its table, and whether it is partial.
    let indexes: Vec<(String, String, bool)> = sqlx::query_as(
        "select indexrelid::regclass::text, indrelid::regclass::text, indpred is not null from pg_index",
    )
    .fetch_all(&mut *conn)
    .await
    .unwrap();
    let plan: serde_json::Value = sqlx::query_scalar(&format!("explain (format json) {sql}"))
        .fetch_one(&mut *conn)
        .await
        .unwrap_or_else(|e| panic!("{e}: {sql}"));
    let mut found = Vec::new();
    let mut nodes = vec![&plan[0]["Plan"]];
    while let Some(node) = nodes.pop() {
        let relation = node["Relation Name"].as_str().unwrap_or("");
        let index = indexes
            .iter()
            .find(|(name, _, _)| node["Index Name"].as_str() == Some(name.as_str()));
        let table = index.map_or(relation, |(_, table, _)| table.as_str());
        let whole_index =
            index.is_some_and(|(_, _, partial)| !partial) && node["Index Cond"].is_null();
        if BIG_TABLES.contains(&table) && (node["Node Type"] == "Seq Scan" || whole_index) {
            found.push(table.to_owned());
        }
        nodes.extend(node["Plans"].as_array().into_iter().flatten());
    }
    found
}

#[sqlx::test(migrator = "engine::db::MIGRATOR")]
async fn no_statement_of_the_scrape_or_the_overview_reads_a_big_table_whole(pool: PgPool) {
    thousands_of_finished_workflows(&pool).await;
    let mut conn = pool.acquire().await.unwrap();
    let mut checked = 0;
    for (file, source) in READS {
        for sql in statements(source) {
            let scans = whole_table_reads(&mut conn, &sql).await;
            assert!(scans.is_empty(), "{file}: seq scan on {scans:?} in {sql}");
            checked += 1;
        }
    }
    assert!(checked >= 9, "only {checked} statements found");
}

#[sqlx::test(migrator = "engine::db::MIGRATOR")]
async fn the_plan_check_catches_the_statements_the_scrape_and_the_overview_ran_before(
    pool: PgPool,
) {
    thousands_of_finished_workflows(&pool).await;
    // Without its partial index, the scrape's count of lost attempts reads every ending.
    for sql in [
        "drop index observation_lost_during_call_idx",
        "analyze observation",
    ] {
        sqlx::query(sql).execute(&pool).await.unwrap();
    }
    let mut conn = pool.acquire().await.unwrap();
    let pool = &mut *conn;
    let old = "select count(*) from observation where outcome is not null
               and body ->> 'observed' = 'worker_lost' and body ->> 'during_call' = 'true'";
    assert_eq!(whole_table_reads(pool, old).await, ["observation"]);
    let old = "select logical, state, count(*) from step group by 1, 2 order by 1, 2";
    assert_eq!(whole_table_reads(pool, old).await, ["step"]);
    let old = "select state, count(*) from workflow group by state order by state";
    assert_eq!(whole_table_reads(pool, old).await, ["workflow"]);
}

#[sqlx::test(migrator = "engine::db::MIGRATOR")]
async fn an_anonymous_request_for_the_overview_is_asked_to_sign_in(pool: PgPool) {
    fixture::workflow(&pool, "a").insert().await;
    let (status, html) = Browser::anonymous(&pool).get("/overview").await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    assert!(html.contains("Sign in"), "{html}");
    assert!(!html.contains("Workflows by state"), "{html}");
}

#[sqlx::test(migrator = "engine::db::MIGRATOR")]
async fn a_signed_in_viewer_sees_the_overview_with_counts_kept_as_workflows_change(pool: PgPool) {
    for (key, state) in [("a", "pending"), ("b", "completed"), ("c", "completed")] {
        fixture::workflow(&pool, key).in_state(state).insert().await;
    }
    sqlx::query("update workflow set state = 'running' where creation_key = 'a'")
        .execute(&pool)
        .await
        .unwrap();
    let mut viewer = signed_in(&pool, engine::domain::Role::Viewer).await;
    let (status, html) = viewer.get("/overview").await;
    assert_eq!(status, StatusCode::OK);
    assert!(html.contains("Workflows by state"), "{html}");
    assert!(
        html.contains("/pkg/z29c.js"),
        "the page does not load the hydration script"
    );
    assert!(
        html.contains(r#"<td data-testid="total" class="num">3</td>"#),
        "{html}"
    );
    let row = |label: &str, n: i64| format!(r#"<td>{label}</td><td class="num">{n}</td>"#);
    assert!(html.contains(&row("Running", 1)), "{html}");
    assert!(html.contains(&row("Pending", 0)), "{html}");
    assert!(html.contains(&row("Completed", 2)), "{html}");
}

#[sqlx::test(migrator = "engine::db::MIGRATOR")]
async fn the_overview_puts_each_waiting_step_in_the_bucket_of_its_age(pool: PgPool) {
    // Nine workflows of one step: seven waiting for 10 s, 5 min, 30 min, 3 h, 2, 3 and 40 days,
    // one unsent with no date, one succeeded.
    for sql in [
        "insert into workflow (id, creation_key, definition_name, definition_version, input, input_digest, state)
         select gen_random_uuid(), 'k-' || i, 'document_delivery', 1, '{}', 'sha256:' || repeat('0', 64), 'running'
         from generate_series(1, 9) i",
        "insert into step (id, workflow_id, logical, definition_version, kind, state, output)
         select gen_random_uuid(), id, 'deliver', 1, 'pure', 'succeeded', '{}' from workflow",
        "update step s set state = 'outcome_unknown', request_key = 'rk-' || s.id, output = null,
                unknown_since = now() - a.age
         from (select id, (array[interval '10 seconds', '5 minutes', '30 minutes', '3 hours',
                                 '2 days', '3 days', '40 days'])[row_number() over (order by id)] as age
               from step) a
         where a.id = s.id and a.age is not null",
        "update step set state = 'unsent', output = null
         where id = (select id from step where state = 'succeeded' order by id limit 1)",
    ] {
        sqlx::query(sql).execute(&pool).await.unwrap();
    }
    let ages = engine::read::stats::outcome_stats(&pool)
        .await
        .unwrap()
        .unknown_age;
    assert_eq!(ages, [1, 1, 1, 1, 3]);
}

#[sqlx::test(migrator = "engine::db::MIGRATOR")]
async fn the_queues_age_filter_with_an_overflowing_number_answers_422(pool: PgPool) {
    let mut viewer = signed_in(&pool, engine::domain::Role::Viewer).await;
    for minutes in ["999999999999999999", "-5", "5256001"] {
        let (status, html) = viewer.get(&format!("/?older_than={minutes}")).await;
        assert_eq!(
            status,
            StatusCode::UNPROCESSABLE_ENTITY,
            "{minutes}: {html}"
        );
        assert!(
            html.contains("older_than must be a number of minutes between 0 and 5256000"),
            "{minutes}: {html}"
        );
    }
    let (status, _) = viewer.get("/?older_than=5256000").await;
    assert_eq!(status, StatusCode::OK);
}

#[sqlx::test(migrator = "engine::db::MIGRATOR")]
async fn the_queues_text_filters_with_a_nul_or_a_huge_value_answer_422(pool: PgPool) {
    let mut viewer = signed_in(&pool, engine::domain::Role::Viewer).await;
    let long = "x".repeat(300);
    for query in [
        "adapter=a%00b".to_owned(),
        "definition=a%00b".to_owned(),
        "q=a%00b".to_owned(),
        format!("q={long}"),
        format!("adapter={long}"),
    ] {
        let (status, html) = viewer.get(&format!("/?{query}")).await;
        assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{query}: {html}");
        assert!(
            html.contains("at most 200 characters, none of them NUL"),
            "{query}: {html}"
        );
    }
}

/// The kept counts, and the same counts grouped from every row.
async fn kept_and_grouped(pool: &PgPool) -> [Vec<(String, String, i64)>; 2] {
    let stats = engine::read::stats::outcome_stats(pool).await.unwrap();
    let (by_step, workflows) = (stats.by_step, stats.workflows);
    let mut kept: Vec<(String, String, i64)> = by_step
        .into_iter()
        .map(|(l, s, n)| (l, format!("{s:?}"), n))
        .chain(
            workflows
                .into_iter()
                .map(|(s, n)| (String::new(), format!("{s:?}"), n)),
        )
        .collect();
    kept.sort();
    let by_step = engine::store::workflow::count_by_state(pool).await.unwrap();
    let rows: Vec<(String, String, i64)> = sqlx::query_as(
        "select logical, state::text, count(*) from step group by 1, 2 order by 1, 2",
    )
    .fetch_all(pool)
    .await
    .unwrap();
    let camel = |s: &str| {
        s.split('_')
            .map(|w| w[..1].to_uppercase() + &w[1..])
            .collect::<String>()
    };
    let mut grouped: Vec<(String, String, i64)> = rows
        .into_iter()
        .map(|(l, s, n)| (l, camel(&s), n))
        .chain(
            by_step
                .into_iter()
                .map(|(s, n)| (String::new(), format!("{s:?}"), n)),
        )
        .collect();
    grouped.sort();
    [kept, grouped]
}

#[sqlx::test(migrator = "engine::db::MIGRATOR")]
async fn the_kept_counts_match_the_rows_through_inserts_changes_and_folds(pool: PgPool) {
    thousands_of_finished_workflows(&pool).await;
    let [kept, grouped] = kept_and_grouped(&pool).await;
    assert_eq!(kept, grouped);
    for sql in [
        "update step set state = 'cancelled' where id in (select id from step where state = 'succeeded' limit 300)",
        "update workflow set state = 'cancelled' where id in (select workflow_id from step where state = 'cancelled')",
        "update step set logical = 'renamed' where id in (select id from step where state = 'succeeded' limit 5)",
    ] {
        sqlx::query(sql).execute(&pool).await.unwrap();
        let [kept, grouped] = kept_and_grouped(&pool).await;
        assert_eq!(kept, grouped, "after {sql}");
    }
    let deltas: i64 = sqlx::query_scalar("select count(*) from step_state_delta")
        .fetch_one(&pool)
        .await
        .unwrap();
    assert_eq!(deltas, 0, "a read leaves the changes folded");
}

/// A connection of `pool` with the one statement of the workflow list's reads that `pick`
/// selects prepared as `search`.
async fn prepared_search(
    pool: &PgPool,
    pick: impl Fn(&str) -> bool,
    one: &str,
) -> sqlx::pool::PoolConnection<sqlx::Postgres> {
    let searching: Vec<String> = statements(include_str!("../../../engine/src/read/workflows.rs"))
        .into_iter()
        .filter(|sql| pick(sql))
        .collect();
    assert_eq!(searching.len(), 1, "{one}");
    let mut conn = pool.acquire().await.unwrap();
    sqlx::query(&format!("prepare search as {}", searching[0]))
        .execute(&mut *conn)
        .await
        .unwrap();
    conn
}

#[sqlx::test(migrator = "engine::db::MIGRATOR")]
async fn a_search_of_the_workflow_list_by_request_key_reads_no_big_table_whole_in_its_generic_plan(
    pool: PgPool,
) {
    thousands_of_finished_workflows(&pool).await;
    let mut conn = prepared_search(
        &pool,
        |sql| sql.contains("from workflow w") && sql.contains("s.request_key = $7"),
        "one statement searches workflows by request key",
    )
    .await;
    // What PostgreSQL plans once it has run a statement a few times: one plan for every value.
    sqlx::query("set plan_cache_mode = force_generic_plan")
        .execute(&mut *conn)
        .await
        .unwrap();
    let by_request_key =
        "execute search(null, null, null, null, null, null, 'rk-1', null, null, 51, null)";
    assert_eq!(
        whole_table_reads(&mut conn, by_request_key).await,
        Vec::<String>::new()
    );
    let by_any_key =
        "execute search(null, null, null, null, null, null, null, null, null, 51, 'rk-1')";
    assert_eq!(
        whole_table_reads(&mut conn, by_any_key).await,
        Vec::<String>::new()
    );
}

#[sqlx::test(migrator = "engine::db::MIGRATOR")]
async fn a_search_of_the_archived_workflows_by_key_reads_no_tombstone_whole_in_any_plan(
    pool: PgPool,
) {
    sqlx::query(
        "insert into archived_workflow (id, creation_key, definition_name, definition_version, state,
                                        input_digest, created_at, settled_at, request_keys,
                                        external_references, archive_file, member_offset, member_length)
         select gen_random_uuid(), 'k-' || i, 'document_delivery', 1, 'completed',
                'sha256:' || repeat('0', 64), now(), now(), array['rk-' || i], array['ref-' || i],
                'day.jsonl.gz', i, 1
         from generate_series(1, 20000) i",
    )
    .execute(&pool)
    .await
    .unwrap();
    sqlx::query("analyze archived_workflow")
        .execute(&pool)
        .await
        .unwrap();
    let mut conn = prepared_search(
        &pool,
        |sql| sql.contains("from archived_workflow a"),
        "one statement searches the tombstones",
    )
    .await;
    // Planned for each key, and once for every key as PostgreSQL does after five searches.
    for mode in ["force_custom_plan", "force_generic_plan"] {
        sqlx::query(&format!("set plan_cache_mode = {mode}"))
            .execute(&mut *conn)
            .await
            .unwrap();
        for search in [
            "execute search(null, null, null, null, null, 'rk-1', null, null, 51, null)",
            "execute search(null, null, null, null, null, null, 'ref-1', null, 51, null)",
            "execute search(null, null, null, null, 'k-1', null, null, null, 51, null)",
            "execute search(null, null, null, null, null, null, null, null, 51, 'rk-1')",
        ] {
            assert_eq!(
                whole_table_reads(&mut conn, search).await,
                Vec::<String>::new(),
                "{mode}: {search}"
            );
        }
    }
    // The search still finds what it found: each key names its one tombstone.
    for key in ["rk-7", "ref-7", "k-7"] {
        let page = engine::read::workflows::list(
            &pool,
            &engine::read::workflows::WorkflowQuery {
                key: Some(key.into()),
                limit: 50,
                ..Default::default()
            },
        )
        .await
        .unwrap();
        let found: Vec<&str> = page
            .workflows
            .iter()
            .map(|w| w.creation_key.as_str())
            .collect();
        assert_eq!(found, ["k-7"], "{key}");
    }
}

#[sqlx::test(migrator = "engine::db::MIGRATOR")]
async fn with_every_connection_of_the_engine_taken_the_console_still_answers_on_its_own(
    pool: PgPool,
) {
    use tower::ServiceExt;
    let engine = sqlx::postgres::PgPoolOptions::new()
        .max_connections(2)
        .acquire_timeout(std::time::Duration::from_millis(300))
        .connect_with((*pool.connect_options()).clone())
        .await
        .unwrap();
    let _held = [
        engine.acquire().await.unwrap(),
        engine.acquire().await.unwrap(),
    ];
    assert!(
        engine.acquire().await.is_err(),
        "the engine's pool is taken"
    );
    // The state `serve` builds.
    let state = server::state::AppState::beside_engine(
        &engine,
        2,
        leptos::prelude::LeptosOptions::builder()
            .output_name("z29c")
            .build(),
    );
    let (timeout, name): (String, String) = sqlx::query_as(
        "select current_setting('statement_timeout'), current_setting('application_name')",
    )
    .fetch_one(&state.pool)
    .await
    .unwrap();
    assert_eq!(
        timeout, "30s",
        "a runaway statement gives its connection back"
    );
    assert_eq!(name, "z29c-console");
    // Sign-in's few connections, made beside the console's, keep their own shorter bound.
    let anonymous: String = sqlx::query_scalar("select current_setting('statement_timeout')")
        .fetch_one(&state.anonymous.0)
        .await
        .unwrap();
    assert_eq!(anonymous, "5s");
    let request = http::Request::get("/readyz")
        .body(axum::body::Body::empty())
        .unwrap();
    let response = server::http::router(state).oneshot(request).await.unwrap();
    assert_eq!(response.status(), StatusCode::OK);
}
