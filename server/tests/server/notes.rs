//! Notes through the console, the API and the command line (docs/DESIGN.md §20): any operator
//! writes one, a viewer cannot, a token sees only its own workflows, and the note lands in the
//! step's timeline, on the workflow's page and in the audit log.

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

async fn notes(pool: &PgPool) -> Vec<(String, Option<String>)> {
    sqlx::query_as("select actor, reason from audit where action = 'note' order by id")
        .fetch_all(pool)
        .await
        .unwrap()
}

#[sqlx::test(migrator = "engine::db::MIGRATOR")]
async fn an_operator_leaves_a_note_on_a_step_page_without_javascript_and_it_is_in_the_timeline(
    pool: PgPool,
) {
    let step = fixture_review_step(&pool, ContractKind::Opaque, "note-page").await;
    let mut olga = signed_in(&pool, Role::Operator).await;
    let page_at = format!("/steps/{step}");
    let (_, page) = olga.get(&page_at).await;
    let add = form_action(&page, "add_note");
    let csrf = input_value(&page, "csrf");
    let step_id = step.to_string();
    let fields = |text: &'static str| {
        [
            ("csrf", csrf.as_str()),
            ("on", "step"),
            ("id", step_id.as_str()),
            ("text", text),
        ]
    };
    let answer = post_plain(&mut olga, &add, &page_at, &fields("  ")).await;
    assert_eq!(answer.status, StatusCode::SEE_OTHER, "a refusal comes back");
    let (_, page) = olga.get(&page_at).await;
    assert!(page.contains("data-testid=\"note-refusal\""), "{page}");
    assert!(notes(&pool).await.is_empty());

    let text = "asked the provider support, ticket 4411";
    let answer = post_plain(&mut olga, &add, &page_at, &fields(text)).await;
    assert!(answer.status.is_redirection(), "{}", answer.body);
    assert_eq!(answer.location, page_at);
    let (_, page) = olga.get(&page_at).await;
    assert!(page.contains(text), "the timeline shows it: {page}");
    let authors: Vec<String> = notes(&pool).await.into_iter().map(|(a, _)| a).collect();
    assert_eq!(authors.len(), 1);
    assert!(authors[0].starts_with("operator-"), "{authors:?}");
}

#[sqlx::test(migrator = "engine::db::MIGRATOR")]
async fn a_viewer_sees_no_note_form_and_cannot_post_one(pool: PgPool) {
    let step = fixture_review_step(&pool, ContractKind::Opaque, "note-viewer").await;
    let (_, operators) = signed_in(&pool, Role::Operator)
        .await
        .get(&format!("/steps/{step}"))
        .await;
    let add = form_action(&operators, "add_note");
    let mut vic = signed_in(&pool, Role::Viewer).await;
    let (_, page) = vic.get(&format!("/steps/{step}")).await;
    assert!(!page.contains("data-testid=\"note-form\""));
    let csrf = input_value(&page, "csrf");
    let step = step.to_string();
    let (status, refused) = vic
        .post(
            &add,
            &[
                ("csrf", &csrf),
                ("on", "step"),
                ("id", &step),
                ("text", "hi"),
            ],
        )
        .await;
    assert_eq!(status, StatusCode::FORBIDDEN, "{refused}");
    assert!(notes(&pool).await.is_empty());
}

#[sqlx::test(migrator = "engine::db::MIGRATOR")]
async fn the_api_writes_and_lists_notes_within_the_tokens_prefix(pool: PgPool) {
    let step = fixture_review_step(&pool, ContractKind::Opaque, "note-api").await;
    let workflow = workflow_of(&pool, step).await;
    let body = json!({"text": "customer called"}).to_string();
    let on_step = format!("/api/v1/steps/{step}/notes");
    let viewer = token(&pool, "reader", Role::Viewer, None).await;
    let (status, _) = call(&pool, "POST", &on_step, Some(&viewer), Some(body.clone())).await;
    assert_eq!(status, StatusCode::FORBIDDEN);
    let other = token(&pool, "shop", Role::Operator, Some("shop-")).await;
    let (status, _) = call(&pool, "POST", &on_step, Some(&other), Some(body.clone())).await;
    assert_eq!(status, StatusCode::NOT_FOUND, "outside its prefix");
    let desk = token(&pool, "desk", Role::Operator, None).await;
    let nowhere = format!("/api/v1/incidents/{}/notes", Uuid::now_v7());
    let (status, _) = call(&pool, "POST", &nowhere, Some(&desk), Some(body.clone())).await;
    assert_eq!(status, StatusCode::NOT_FOUND);

    let (status, note) = call(&pool, "POST", &on_step, Some(&desk), Some(body.clone())).await;
    assert_eq!(status, StatusCode::CREATED, "{note}");
    assert_eq!(note["author"], "desk");
    let on_workflow = format!("/api/v1/workflows/{workflow}/notes");
    let (status, _) = call(&pool, "POST", &on_workflow, Some(&desk), Some(body)).await;
    assert_eq!(status, StatusCode::CREATED);
    let (status, listed) = call(&pool, "GET", &on_workflow, Some(&viewer), None).await;
    assert_eq!(status, StatusCode::OK);
    let steps: Vec<&serde_json::Value> = listed
        .as_array()
        .unwrap()
        .iter()
        .map(|n| &n["step"])
        .collect();
    assert_eq!(steps, [&json!(step), &json!(null)], "{listed}");

    let since = (chrono::Utc::now() - chrono::Duration::hours(1)).to_rfc3339();
    let queue = format!(
        "/api/v1/queue?noted_since={}",
        engine::domain::identity::percent_encode(&since)
    );
    let (status, page) = call(&pool, "GET", &queue, Some(&desk), None).await;
    assert_eq!(status, StatusCode::OK, "{page}");
    assert_eq!(page["rows"].as_array().unwrap().len(), 1, "{page}");
}

#[sqlx::test(migrator = "engine::db::MIGRATOR")]
async fn the_command_line_writes_a_note_as_the_operator_it_names(pool: PgPool) {
    let step = fixture_review_step(&pool, ContractKind::Opaque, "note-cli").await;
    engine::operators::add(&pool, "olga", Role::Operator)
        .await
        .unwrap();
    let step = step.to_string();
    let noted = z29c(
        &pool,
        &[
            "note",
            "--step",
            &step,
            "--as",
            "olga",
            "waiting for the bank",
            "--json",
        ],
    )
    .await;
    assert_eq!(noted.exit, Exit::Done, "{}", noted.err);
    let answer: serde_json::Value = serde_json::from_str(&noted.out).unwrap();
    assert_eq!(answer["text"], "waiting for the bank");
    let neither = z29c(&pool, &["note", "--as", "olga", "where?"]).await;
    assert_ne!(neither.exit, Exit::Done, "a note names what it is about");
    assert_eq!(
        notes(&pool).await,
        [("olga".to_owned(), Some("waiting for the bank".to_owned()))]
    );
}
