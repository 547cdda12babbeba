//! The bulk pause (docs/DESIGN.md §20) from every surface: the workflows page lists workflows by
//! filter and pauses those listed with a plain form; `POST /api/v1/workflows/pause` pauses the
//! ids a program listed; `z29c workflow pause-matching` pauses what a filter matches.

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

async fn paused(pool: &PgPool) -> Vec<Uuid> {
    sqlx::query_scalar("select id from workflow where paused_at is not null order by id")
        .fetch_all(pool)
        .await
        .unwrap()
}

/// Two workflows with a step in review, by their workflow ids, sorted.
async fn two_workflows(pool: &PgPool, tag: &str) -> Vec<Uuid> {
    let mut ids = Vec::new();
    for i in 0..2 {
        let step = fixture_review_step(pool, ContractKind::Opaque, &format!("{tag}-{i}")).await;
        ids.push(workflow_of(pool, step).await);
    }
    ids.sort();
    ids
}

#[sqlx::test(migrator = "engine::db::MIGRATOR")]
async fn an_operator_pauses_the_workflows_a_filter_lists_on_the_workflows_page(pool: PgPool) {
    let ids = two_workflows(&pool, "page-bulk").await;
    let mut olga = signed_in(&pool, Role::Operator).await;
    let (status, page) = olga.get("/workflows?adapter=letters-opaque").await;
    assert_eq!(status, StatusCode::OK);
    for id in &ids {
        assert!(page.contains(&format!("data-workflow=\"{id}\"")), "{page}");
    }
    let fields = [
        ("csrf", input_value(&page, "csrf")),
        ("workflows", input_value(&page, "workflows")),
        ("back", input_value(&page, "back")),
        ("reason", "the partner's API is down".to_owned()),
    ];
    assert_eq!(
        fields[2].1, "/workflows?adapter=letters-opaque",
        "back to the same list"
    );
    let fields: Vec<(&str, &str)> = fields.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let action = form_action(&page, "pause_workflows");
    let answer = post_plain(&mut olga, &action, "/workflows", &fields).await;
    // Where it redirected says why, when nothing was paused (a refusal goes back to the list).
    let said = format!("{} to {}: {}", answer.status, answer.location, answer.body);
    assert!(answer.status.is_redirection(), "{said}");
    assert_eq!(paused(&pool).await, ids, "{said}");
    let (_, page) = olga.get("/workflows?adapter=letters-opaque").await;
    assert!(page.contains("Paused 2 workflow(s)"), "{page}");

    let (_, viewers) = signed_in(&pool, Role::Viewer).await.get("/workflows").await;
    assert!(
        !viewers.contains("data-testid=\"pause-listed-form\""),
        "a viewer gets no form"
    );
}

#[sqlx::test(migrator = "engine::db::MIGRATOR")]
async fn the_api_pauses_the_listed_ids_within_the_tokens_prefix(pool: PgPool) {
    let ids = two_workflows(&pool, "api-bulk").await;
    let uri = "/api/v1/workflows/pause";
    let body = json!({"reason": "partner outage", "workflows": ids}).to_string();
    let viewer = token(&pool, "dashboard", Role::Viewer, None).await;
    let (status, _) = call(&pool, "POST", uri, Some(&viewer), Some(body.clone())).await;
    assert_eq!(status, StatusCode::FORBIDDEN);
    let other_team = token(&pool, "team-b", Role::Operator, Some("team-b/")).await;
    let (status, _) = call(&pool, "POST", uri, Some(&other_team), Some(body.clone())).await;
    assert_eq!(
        status,
        StatusCode::NOT_FOUND,
        "workflows outside its prefix are not its to see"
    );
    assert!(paused(&pool).await.is_empty());

    let operator = token(&pool, "oncall", Role::Operator, None).await;
    let (status, done) = call(&pool, "POST", uri, Some(&operator), Some(body)).await;
    assert_eq!(status, StatusCode::OK, "{done}");
    assert_eq!(done["paused"].as_array().unwrap().len(), 2);
    assert_eq!(paused(&pool).await, ids);
    let empty = json!({"reason": "x", "workflows": []}).to_string();
    let (status, _) = call(&pool, "POST", uri, Some(&operator), Some(empty)).await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY);
}

#[sqlx::test(migrator = "engine::db::MIGRATOR")]
async fn the_command_line_pauses_what_a_filter_matches(pool: PgPool) {
    let ids = two_workflows(&pool, "cli-bulk").await;
    engine::operators::add(&pool, "olga", Role::Operator)
        .await
        .unwrap();
    let args = [
        "workflow",
        "pause-matching",
        "--adapter",
        "letters-opaque",
        "--as",
        "olga",
        "--reason",
        "partner outage",
        "--json",
    ];
    let ran = z29c(&pool, &args).await;
    assert_eq!(ran.exit, Exit::Done, "{}", ran.err);
    let answer: serde_json::Value = serde_json::from_str(&ran.out).unwrap();
    assert_eq!(answer["paused"].as_array().unwrap().len(), 2, "{answer}");
    assert_eq!(paused(&pool).await, ids);
    let none = z29c(
        &pool,
        &[
            "workflow",
            "pause-matching",
            "--definition",
            "nothing",
            "--as",
            "olga",
            "--reason",
            "x",
        ],
    )
    .await;
    assert_eq!(none.exit, Exit::Refused, "{}", none.out);
}
