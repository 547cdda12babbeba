//! Four eyes from every surface (docs/DESIGN.md §20): on the step page without JavaScript the
//! first approver's waiver becomes a proposal the page shows, the same approver sees no form to
//! confirm it, and a second one confirms it; the API's confirm refuses a token issued to the
//! proposer or to nobody; `z29c proposal decline` declines as the approver it names.

use engine::domain::{ContractKind, OperatorAction, Role};
use engine::store::journal::Actor;
use engine::store::token::NewToken;
use http::StatusCode;
use serde_json::json;
use sqlx::PgPool;
use uuid::Uuid;

use crate::api::call;
use crate::cli::z29c;
use crate::console::{action_form, fixture_review_step, form_action, input_value, signed_in};
use crate::kept_forms::post_plain;
use crate::ops_api::post_if_match;
use server::ops::Exit;

/// A step under review whose adapter's file says waiving needs two approvers.
async fn step_needing_two_approvers(pool: &PgPool, key: &str) -> Uuid {
    let step = fixture_review_step(pool, ContractKind::Opaque, key).await;
    let contract = engine::adapter::contracts::declared(ContractKind::Opaque, 1_000, 0, false);
    let mut spec =
        engine::adapter::protocol::protocol_spec_claiming("http://127.0.0.1:9", &contract);
    spec.four_eyes = Some(engine::adapter::spec::FourEyes {
        actions: vec![OperatorAction::Waive],
        expires_after: engine::adapter::spec::Span(std::time::Duration::from_secs(3600)),
    });
    sqlx::query("update adapter set source = $1 where name = 'letters-opaque'")
        .bind(serde_json::to_string(&spec).unwrap())
        .execute(pool)
        .await
        .unwrap();
    step
}

async fn state(pool: &PgPool, step: Uuid) -> String {
    sqlx::query_scalar("select state::text from step where id = $1")
        .bind(step)
        .fetch_one(pool)
        .await
        .unwrap()
}

async fn proposal_of(pool: &PgPool, step: Uuid) -> Uuid {
    sqlx::query_scalar("select id from proposal where step_id = $1 and decision is null")
        .bind(step)
        .fetch_one(pool)
        .await
        .unwrap()
}

#[sqlx::test(migrator = "engine::db::MIGRATOR")]
async fn a_waiver_is_proposed_on_the_step_page_and_a_second_approver_confirms_it_there(
    pool: PgPool,
) {
    let step = step_needing_two_approvers(&pool, "page-four-eyes").await;
    let mut ana = signed_in(&pool, Role::Approver).await;
    let (_, page) = ana.get(&format!("/steps/{step}")).await;
    assert!(
        page.contains("Needs two approvers"),
        "the page says so before the action"
    );
    let (act, version, csrf) = action_form(&mut ana, step).await;
    let fields = [
        ("step", step.to_string()),
        ("version", version),
        ("csrf", csrf),
        ("action", "waive".to_owned()),
        ("reason", "customer confirmed by phone".to_owned()),
        (
            "residual_uncertainty",
            "whether the letter arrived".to_owned(),
        ),
    ];
    let fields: Vec<(&str, &str)> = fields.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let answer = post_plain(&mut ana, &act, &format!("/steps/{step}"), &fields).await;
    assert!(answer.status.is_redirection(), "{}", answer.body);
    assert_eq!(state(&pool, step).await, "review_required");
    let (_, page) = ana.get(&format!("/steps/{step}")).await;
    assert!(page.contains("data-testid=\"proposal\""), "{page}");
    assert!(
        page.contains("customer confirmed by phone"),
        "the proposal's reason is shown"
    );
    assert!(
        !page.contains("data-testid=\"decide-form\""),
        "the proposer cannot confirm"
    );

    let mut bo = signed_in(&pool, Role::Approver).await;
    let (_, page) = bo.get(&format!("/steps/{step}")).await;
    let decide = form_action(&page, "decide_proposal");
    let fields = [
        ("csrf", input_value(&page, "csrf")),
        ("proposal", input_value(&page, "proposal")),
        ("reason", "checked the call log".to_owned()),
        ("decision", "confirm".to_owned()),
    ];
    let fields: Vec<(&str, &str)> = fields.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let answer = post_plain(&mut bo, &decide, &format!("/steps/{step}"), &fields).await;
    assert!(answer.status.is_redirection(), "{}", answer.body);
    assert_eq!(state(&pool, step).await, "waived");
    let (_, page) = bo.get(&format!("/steps/{step}")).await;
    assert!(
        !page.contains("data-testid=\"proposal\""),
        "nothing waits any more"
    );
}

#[sqlx::test(migrator = "engine::db::MIGRATOR")]
async fn the_api_proposes_shows_the_proposal_and_refuses_a_token_issued_to_the_proposer(
    pool: PgPool,
) {
    let step = step_needing_two_approvers(&pool, "api-four-eyes").await;
    let mut tokens = Vec::new();
    for (name, person) in [
        ("ana-script", Some("ana")),
        ("ana-laptop", Some("ana")),
        ("bo-script", Some("bo")),
    ] {
        let new = NewToken {
            name,
            role: Role::Approver,
            creation_key_prefix: None,
            may_configure: false,
            adapters: None,
            on_behalf_of: person,
        };
        tokens.push(
            engine::store::token::create(&pool, &new, Actor::Engine("test"))
                .await
                .unwrap(),
        );
    }
    let body =
        json!({"reason": "customer confirmed", "residual_uncertainty": "whether it arrived"});
    let (status, done) = call(
        &pool,
        "POST",
        &format!("/api/v1/steps/{step}/actions/waive"),
        Some(&tokens[0]),
        Some(body.to_string()),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{done}");
    assert!(
        done["message"].as_str().unwrap().starts_with("Proposed"),
        "{done}"
    );
    let (_, shown) = call(
        &pool,
        "GET",
        &format!("/api/v1/steps/{step}"),
        Some(&tokens[0]),
        None,
    )
    .await;
    let proposal = shown["evidence"]["proposal"]["id"]
        .as_str()
        .unwrap()
        .to_owned();
    assert_eq!(shown["evidence"]["proposal"]["proposed_by"], "ana");
    assert_eq!(proposal, proposal_of(&pool, step).await.to_string());

    let confirm = format!("/api/v1/proposals/{proposal}/confirm");
    let version = shown["version"].as_str().unwrap().to_owned();
    let stale = format!("\"{}\"", version.parse::<i64>().unwrap() - 1);
    let (status, _) = post_if_match(
        &pool,
        &confirm,
        &tokens[2],
        Some(&stale),
        json!({"reason": "fine"}),
    )
    .await;
    assert_eq!(
        status,
        StatusCode::PRECONDITION_FAILED,
        "an If-Match of an older step"
    );
    let reason = json!({"reason": "fine"}).to_string();
    let (status, refused) = call(
        &pool,
        "POST",
        &confirm,
        Some(&tokens[1]),
        Some(reason.clone()),
    )
    .await;
    assert_eq!(
        status,
        StatusCode::FORBIDDEN,
        "ana's other token is still ana: {refused}"
    );
    // A token issued to nobody (a team's chat button) stands for no second person.
    let shared = crate::api::token(&pool, "team-button", Role::Approver, None).await;
    let (status, refused) =
        call(&pool, "POST", &confirm, Some(&shared), Some(reason.clone())).await;
    assert_eq!(status, StatusCode::FORBIDDEN, "{refused}");
    assert!(
        refused["error"].as_str().unwrap().contains("--for"),
        "{refused}"
    );
    assert_eq!(state(&pool, step).await, "review_required");
    let (status, done) = call(
        &pool,
        "POST",
        &confirm,
        Some(&tokens[2]),
        Some(reason.clone()),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{done}");
    assert_eq!(state(&pool, step).await, "waived");
    let (status, _) = call(&pool, "POST", &confirm, Some(&tokens[2]), Some(reason)).await;
    assert_eq!(status, StatusCode::CONFLICT, "decided already");
    let scraped = crate::support::scrape_metrics(&pool).await;
    assert!(scraped.contains("z29c_proposals_waiting 0"), "{scraped}");
}

#[sqlx::test(migrator = "engine::db::MIGRATOR")]
async fn the_command_line_declines_a_proposal_as_the_approver_it_names(pool: PgPool) {
    let step = step_needing_two_approvers(&pool, "cli-four-eyes").await;
    engine::operators::add(&pool, "ana", Role::Approver)
        .await
        .unwrap();
    engine::operators::add(&pool, "bo", Role::Approver)
        .await
        .unwrap();
    let waive = z29c(
        &pool,
        &[
            "step",
            "waive",
            &step.to_string(),
            "--as",
            "ana",
            "--reason",
            "customer confirmed",
            "--residual-uncertainty",
            "whether it arrived",
        ],
    )
    .await;
    assert_eq!(waive.exit, Exit::Done, "{}", waive.err);
    assert!(waive.out.contains("Proposed"), "{}", waive.out);
    let proposal = proposal_of(&pool, step).await.to_string();
    let decide = |who: &'static str| {
        let args = [
            "proposal",
            "decline",
            proposal.as_str(),
            "--as",
            who,
            "--reason",
            "not yet",
        ];
        args.map(str::to_owned)
    };
    let own = decide("ana");
    let refused = z29c(&pool, &own.iter().map(String::as_str).collect::<Vec<_>>()).await;
    assert_eq!(refused.exit, Exit::Refused, "{}", refused.out);
    let other = decide("bo");
    let declined = z29c(&pool, &other.iter().map(String::as_str).collect::<Vec<_>>()).await;
    assert_eq!(declined.exit, Exit::Done, "{}", declined.err);
    assert!(
        declined.out.contains("Declined ana's proposal"),
        "{}",
        declined.out
    );
    assert_eq!(state(&pool, step).await, "review_required");
}
