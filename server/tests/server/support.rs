//! What every server test starts from: the router over a pool, as `serve` builds it.

use leptos::prelude::LeptosOptions;
use server::http::router;
use server::state::AppState;
use sqlx::PgPool;

/// The router `serve` mounts, over `pool`.
pub fn app(pool: PgPool) -> axum::Router {
    router(AppState::new(
        pool,
        LeptosOptions::builder().output_name("z29c").build(),
    ))
}

/// What `GET /metrics` answers a viewer's token now (a 200, or the test fails), as text.
pub async fn scrape_metrics(pool: &PgPool) -> String {
    use tower::ServiceExt;
    let name = format!("prometheus-{}", uuid::Uuid::new_v4());
    let token = crate::api::token(pool, &name, engine::domain::Role::Viewer, None).await;
    let request = http::Request::get("/metrics")
        .header(http::header::AUTHORIZATION, format!("Bearer {token}"))
        .body(axum::body::Body::empty())
        .unwrap();
    let response = app(pool.clone()).oneshot(request).await.unwrap();
    assert_eq!(response.status(), http::StatusCode::OK);
    let body = axum::body::to_bytes(response.into_body(), usize::MAX)
        .await
        .unwrap();
    String::from_utf8(body.to_vec()).unwrap()
}

/// The policy of this test process: the library's (any public address, any variable) with
/// secret files allowed in the temporary directory, where the tests write theirs. Every test
/// that names a file calls it; the first call sets it for the whole process.
pub fn allow_temporary_secrets() {
    engine::adapter::policy::set(engine::adapter::policy::Policy {
        secrets_dir: Some(std::fs::canonicalize(std::env::temp_dir()).unwrap()),
        ..engine::adapter::policy::Policy::default()
    });
}

/// Applies the definitions shipped in the repository, as the demo does.
pub async fn shipped(pool: &PgPool) {
    server::shipped::apply_definitions(pool).await.unwrap();
}

/// Rows a server test starts from that no API call produces on demand, each named for the
/// situation it stands for; the SQL for each is written here once.
pub mod fixture {
    use sqlx::PgPool;
    use uuid::Uuid;

    /// As the engine leaves an opaque step whose only attempt ended unknown: step `logical` of
    /// `workflow` review required, unknown since now, one attempt counted. Returns its id.
    pub async fn under_review(pool: &PgPool, workflow: Uuid, logical: &str) -> Uuid {
        sqlx::query_scalar(
            "update step set state = 'review_required', unknown_since = now(), attempt_count = 1
             where workflow_id = $1 and logical = $2 returning id",
        )
        .bind(workflow)
        .bind(logical)
        .fetch_one(pool)
        .await
        .unwrap()
    }

    /// A workflow row created under `creation_key`: a `document_delivery` v1 with an empty input
    /// and a placeholder digest, pending, with no steps. For what reads workflows, not runs them.
    pub fn workflow<'p>(pool: &'p PgPool, creation_key: &str) -> Workflow<'p> {
        Workflow {
            pool,
            creation_key: creation_key.to_owned(),
            state: "pending",
        }
    }

    /// A `workflow` row to insert; see [`workflow`].
    pub struct Workflow<'p> {
        pool: &'p PgPool,
        creation_key: String,
        state: &'static str,
    }

    impl Workflow<'_> {
        /// The workflow's state (a `workflow_state`).
        pub fn in_state(mut self, state: &'static str) -> Self {
            self.state = state;
            self
        }

        pub async fn insert(self) {
            sqlx::query(
                "insert into workflow (id, creation_key, definition_name, definition_version, input, input_digest, state, settled_at)
                 values (gen_random_uuid(), $1, 'document_delivery', 1, '{}', 'sha256:' || repeat('0', 64), $2::workflow_state,
                         workflow_settled_at($2::workflow_state, null))",
            )
            .bind(&self.creation_key)
            .bind(self.state)
            .execute(self.pool)
            .await
            .unwrap();
        }
    }

    /// As the metrics projection leaves counter `name` with `labels` after counting `value`
    /// events: the labels stored as the engine stores them, sorted pairs serialized as JSON.
    pub async fn counted(pool: &PgPool, name: &str, labels: &[(&str, &str)], value: i64) {
        let mut labels = labels.to_vec();
        labels.sort_unstable();
        sqlx::query("insert into metric_counter (name, labels, value) values ($1, $2, $3)")
            .bind(name)
            .bind(serde_json::to_string(&labels).unwrap())
            .bind(value)
            .execute(pool)
            .await
            .unwrap();
    }
}
