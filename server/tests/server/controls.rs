//! The console's and the API's controls over more than one step (docs/DESIGN.md §20): an
//! approver holds and resumes an adapter on the adapters page, an operator pauses and resumes a
//! workflow on its page — plain forms that work without JavaScript — and the API and the command
//! line do the same under the same rules.

use engine::domain::{ContractKind, Role};
use http::StatusCode;
use serde_json::json;
use sqlx::PgPool;
use uuid::Uuid;

use crate::api::{call, token};
use crate::cli::z29c;
use crate::console::{fixture_review_step, form_action, input_value, signed_in, workflow_of};
use crate::kept_forms::post_plain;
use server::ops::Exit;

async fn held_adapters(pool: &PgPool) -> Vec<String> {
    sqlx::query_scalar("select name from adapter where held_at is not null order by name")
        .fetch_all(pool)
        .await
        .unwrap()
}

async fn paused_by(pool: &PgPool, workflow: Uuid) -> Option<String> {
    sqlx::query_scalar("select paused_by from workflow where id = $1")
        .bind(workflow)
        .fetch_one(pool)
        .await
        .unwrap()
}

/// The `/metrics` line for `name`, if it is there.
async fn metric(pool: &PgPool, name: &str) -> Option<String> {
    crate::support::scrape_metrics(pool)
        .await
        .lines()
        .find(|l| l.starts_with(name))
        .map(str::to_owned)
}

#[sqlx::test(migrator = "engine::db::MIGRATOR")]
async fn an_approver_holds_and_resumes_an_adapter_on_the_adapters_page_without_javascript(
    pool: PgPool,
) {
    fixture_review_step(&pool, ContractKind::Opaque, "page-hold").await;
    let mut ana = signed_in(&pool, Role::Approver).await;
    let (status, page) = ana.get("/adapters").await;
    assert_eq!(status, StatusCode::OK);
    assert!(page.contains("data-adapter=\"letters-opaque\""), "{page}");
    let adapter = input_value(&page, "adapter");
    let hold = form_action(&page, "hold_adapter");
    let csrf = input_value(&page, "csrf");
    let answer = post_plain(
        &mut ana,
        &hold,
        "/adapters",
        &[
            ("csrf", &csrf),
            ("adapter", &adapter),
            ("reason", "provider status page: elevated errors"),
        ],
    )
    .await;
    assert!(answer.status.is_redirection(), "{}", answer.body);
    assert_eq!(answer.location, "/adapters");
    assert_eq!(held_adapters(&pool).await, ["letters-opaque"]);
    let (_, page) = ana.get("/adapters").await;
    assert!(page.contains("data-testid=\"notice\""), "{page}");
    assert!(
        page.contains("provider status page: elevated errors"),
        "the hold and its reason are on the page"
    );

    let resume = form_action(&page, "resume_adapter");
    let answer = post_plain(
        &mut ana,
        &resume,
        "/adapters",
        &[
            ("csrf", &csrf),
            ("adapter", &adapter),
            ("reason", "provider recovered"),
            ("per_second", "oops"),
        ],
    )
    .await;
    assert_eq!(answer.status, StatusCode::SEE_OTHER, "a refusal comes back");
    let (_, page) = ana.get("/adapters").await;
    assert!(page.contains("not `oops`"), "the refusal is said: {page}");
    assert!(page.contains("value=\"oops\""), "what was typed is kept");
    assert_eq!(held_adapters(&pool).await, ["letters-opaque"], "still held");
    post_plain(
        &mut ana,
        &resume,
        "/adapters",
        &[
            ("csrf", &csrf),
            ("adapter", &adapter),
            ("reason", "provider recovered"),
            ("per_second", "2"),
        ],
    )
    .await;
    assert!(held_adapters(&pool).await.is_empty());
}

#[sqlx::test(migrator = "engine::db::MIGRATOR")]
async fn an_operator_sees_no_hold_form_and_a_forged_hold_changes_nothing(pool: PgPool) {
    fixture_review_step(&pool, ContractKind::Opaque, "page-forged").await;
    let (_, approvers) = signed_in(&pool, Role::Approver)
        .await
        .get("/adapters")
        .await;
    let hold = form_action(&approvers, "hold_adapter");
    let mut olga = signed_in(&pool, Role::Operator).await;
    let (status, page) = olga.get("/adapters").await;
    assert_eq!(status, StatusCode::OK);
    assert!(!page.contains("data-testid=\"hold-form\""), "{page}");
    let csrf = input_value(&page, "csrf");
    let (status, refused) = olga
        .post(
            &hold,
            &[
                ("csrf", &csrf),
                ("adapter", "letters-opaque"),
                ("reason", "forged"),
            ],
        )
        .await;
    assert_eq!(status, StatusCode::FORBIDDEN, "{refused}");
    assert!(refused.contains("needs the approver role"), "{refused}");
    assert!(held_adapters(&pool).await.is_empty());
}

#[sqlx::test(migrator = "engine::db::MIGRATOR")]
async fn an_operator_pauses_and_resumes_a_workflow_on_its_page_without_javascript(pool: PgPool) {
    let step = fixture_review_step(&pool, ContractKind::Opaque, "page-pause").await;
    let workflow = workflow_of(&pool, step).await;
    let mut olga = signed_in(&pool, Role::Operator).await;
    let page_at = format!("/workflows/{workflow}");
    let (_, page) = olga.get(&page_at).await;
    let csrf = input_value(&page, "csrf");
    let pause = form_action(&page, "pause_workflow");
    let answer = post_plain(
        &mut olga,
        &pause,
        &page_at,
        &[
            ("csrf", &csrf),
            ("workflow", &workflow.to_string()),
            ("reason", "the customer asked us to wait"),
        ],
    )
    .await;
    assert!(answer.status.is_redirection(), "{}", answer.body);
    assert_eq!(answer.location, page_at);
    assert!(paused_by(&pool, workflow).await.is_some());
    let (_, page) = olga.get(&page_at).await;
    assert!(page.contains("data-testid=\"paused\""), "{page}");
    assert!(page.contains("the customer asked us to wait"));
    assert_eq!(
        metric(&pool, "z29c_workflows_paused").await.as_deref(),
        Some("z29c_workflows_paused 1")
    );

    let resume = form_action(&page, "resume_workflow");
    post_plain(
        &mut olga,
        &resume,
        &page_at,
        &[
            ("csrf", &csrf),
            ("workflow", &workflow.to_string()),
            ("reason", "confirmed"),
        ],
    )
    .await;
    assert_eq!(paused_by(&pool, workflow).await, None);
    let audited: Vec<String> = sqlx::query_scalar(
        "select action from audit where workflow_id = $1 and action like 'workflow_%' order by id",
    )
    .bind(workflow)
    .fetch_all(&pool)
    .await
    .unwrap();
    assert_eq!(audited, ["workflow_pause", "workflow_resume"]);
}

#[sqlx::test(migrator = "engine::db::MIGRATOR")]
async fn the_api_pauses_for_operator_tokens_within_their_prefix_and_refuses_viewers(pool: PgPool) {
    let step = fixture_review_step(&pool, ContractKind::Opaque, "api-pause").await;
    let workflow = workflow_of(&pool, step).await;
    let uri = format!("/api/v1/workflows/{workflow}/pause");
    let body = json!({"reason": "hold on"}).to_string();
    let viewer = token(&pool, "reader", Role::Viewer, None).await;
    let (status, _) = call(&pool, "POST", &uri, Some(&viewer), Some(body.clone())).await;
    assert_eq!(status, StatusCode::FORBIDDEN);
    let other = token(&pool, "shop", Role::Operator, Some("shop-")).await;
    let (status, _) = call(&pool, "POST", &uri, Some(&other), Some(body.clone())).await;
    assert_eq!(status, StatusCode::NOT_FOUND, "outside its prefix");
    let unknown = format!("/api/v1/workflows/{}/pause", Uuid::now_v7());
    let desk = token(&pool, "desk", Role::Operator, None).await;
    let (status, _) = call(&pool, "POST", &unknown, Some(&desk), Some(body.clone())).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    assert_eq!(paused_by(&pool, workflow).await, None, "nothing paused");

    let (status, paused) = call(&pool, "POST", &uri, Some(&desk), Some(body.clone())).await;
    assert_eq!(status, StatusCode::OK, "{paused}");
    assert_eq!(paused["pause"]["paused_by"], "token:desk");
    let (status, _) = call(&pool, "POST", &uri, Some(&desk), Some(body.clone())).await;
    assert_eq!(status, StatusCode::CONFLICT, "paused already");
    let shown_at = format!("/api/v1/workflows/{workflow}");
    let (_, shown) = call(&pool, "GET", &shown_at, Some(&desk), None).await;
    assert_eq!(shown["paused"]["reason"], "hold on", "{shown}");
    let resume = format!("/api/v1/workflows/{workflow}/resume");
    let (status, resumed) = call(&pool, "POST", &resume, Some(&desk), Some(body)).await;
    assert_eq!(status, StatusCode::OK, "{resumed}");
}

#[sqlx::test(migrator = "engine::db::MIGRATOR")]
async fn the_command_line_pauses_and_resumes_a_workflow_as_the_operator_it_names(pool: PgPool) {
    let step = fixture_review_step(&pool, ContractKind::Opaque, "cli-pause").await;
    let workflow = workflow_of(&pool, step).await.to_string();
    engine::operators::add(&pool, "olga", Role::Operator)
        .await
        .unwrap();
    let act = |verb: &'static str| {
        [
            "workflow", verb, &workflow, "--as", "olga", "--reason", "checking", "--json",
        ]
    };
    let paused = z29c(&pool, &act("pause")).await;
    assert_eq!(paused.exit, Exit::Done, "{}", paused.err);
    let answer: serde_json::Value = serde_json::from_str(&paused.out).unwrap();
    assert_eq!(answer["pause"]["paused_by"], "olga");
    let shown = z29c(&pool, &["workflow", "show", &workflow]).await;
    assert!(shown.out.contains("by olga since"), "{}", shown.out);
    let resumed = z29c(&pool, &act("resume")).await;
    assert_eq!(resumed.exit, Exit::Done, "{}", resumed.err);
    let again = z29c(&pool, &act("resume")).await;
    assert_eq!(again.exit, Exit::Refused, "{}", again.out);
}
