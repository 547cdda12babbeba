//! The operator commands at the command line, parsed as typed and run on a fresh database:
//! they act through the console's engine functions, as the operator `--as` names, refuse in
//! the engine's words, and print JSON that programs can read.

use engine::domain::{ContractKind, Role};
use server::ops::{Exit, Io, run_on};
use sqlx::PgPool;
use uuid::Uuid;

use crate::support::fixture;

/// What one command printed, and how it ended.
pub(crate) struct Ran {
    pub(crate) exit: Exit,
    pub(crate) out: String,
    pub(crate) err: String,
}

pub(crate) async fn z29c(pool: &PgPool, args: &[&str]) -> Ran {
    let (mut out, mut err) = (Vec::new(), Vec::new());
    let exit = run_on(
        pool,
        args,
        &mut Io {
            out: &mut out,
            err: &mut err,
        },
    )
    .await
    .unwrap();
    Ran {
        exit,
        out: String::from_utf8(out).unwrap(),
        err: String::from_utf8(err).unwrap(),
    }
}

/// An adapter with contract `kind` named `letters-KIND`, and one workflow (`cli-test`) whose
/// delivery step waits for review.
async fn step_under_review(pool: &PgPool, kind: ContractKind) -> Uuid {
    crate::console::fixture_review_step(pool, kind, "cli-test").await
}

async fn state_of(pool: &PgPool, step: Uuid) -> String {
    sqlx::query_scalar("select state::text from step where id = $1")
        .bind(step)
        .fetch_one(pool)
        .await
        .unwrap()
}

/// Every audit entry of `step`: actor, its kind, action.
async fn audit_of(pool: &PgPool, step: Uuid) -> Vec<(String, String, String)> {
    sqlx::query_as("select actor, actor_kind, action from audit where step_id = $1 order by id")
        .bind(step)
        .fetch_all(pool)
        .await
        .unwrap()
}

#[sqlx::test(migrator = "engine::db::MIGRATOR")]
async fn a_retry_from_the_cli_readies_the_step_and_the_audit_log_names_the_operator(pool: PgPool) {
    let step = step_under_review(&pool, ContractKind::Idempotent).await;
    engine::operators::add(&pool, "ana", Role::Operator)
        .await
        .unwrap();
    let id = step.to_string();

    let ran = z29c(
        &pool,
        &[
            "step",
            "retry",
            &id,
            "--as",
            "ana",
            "--reason",
            "provider back up",
        ],
    )
    .await;

    assert_eq!(ran.exit, Exit::Done, "{}", ran.err);
    assert!(ran.out.contains("same request key"), "{}", ran.out);
    assert_eq!(state_of(&pool, step).await, "ready");
    assert_eq!(
        audit_of(&pool, step).await,
        vec![("ana".into(), "operator".into(), "retry_same_key".into())]
    );
}

#[sqlx::test(migrator = "engine::db::MIGRATOR")]
async fn a_viewers_retry_is_refused_in_the_engines_words_and_changes_nothing(pool: PgPool) {
    let step = step_under_review(&pool, ContractKind::Idempotent).await;
    engine::operators::add(&pool, "vic", Role::Viewer)
        .await
        .unwrap();
    let id = step.to_string();

    let ran = z29c(
        &pool,
        &["step", "retry", &id, "--as", "vic", "--reason", "why not"],
    )
    .await;

    assert_eq!(ran.exit, Exit::Refused);
    assert!(ran.err.contains("needs the operator role"), "{}", ran.err);
    assert_eq!(ran.out, "");
    assert_eq!(state_of(&pool, step).await, "review_required");
    assert!(audit_of(&pool, step).await.is_empty());
}

#[sqlx::test(migrator = "engine::db::MIGRATOR")]
async fn an_action_the_contract_forbids_is_refused_and_changes_nothing(pool: PgPool) {
    let step = step_under_review(&pool, ContractKind::Opaque).await;
    engine::operators::add(&pool, "ana", Role::Approver)
        .await
        .unwrap();
    let id = step.to_string();

    let ran = z29c(
        &pool,
        &["step", "retry", &id, "--as", "ana", "--reason", "again"],
    )
    .await;

    assert_eq!(ran.exit, Exit::Refused);
    assert!(
        ran.err
            .contains("is not permitted for a step that is review required"),
        "{}",
        ran.err
    );
    assert_eq!(state_of(&pool, step).await, "review_required");
    assert!(audit_of(&pool, step).await.is_empty());
}

#[sqlx::test(migrator = "engine::db::MIGRATOR")]
async fn an_operator_no_one_enabled_is_a_usage_error_and_changes_nothing(pool: PgPool) {
    let step = step_under_review(&pool, ContractKind::Idempotent).await;
    engine::operators::add(&pool, "gone", Role::Approver)
        .await
        .unwrap();
    engine::operators::disable(&pool, "gone", engine::store::journal::Actor::Engine("test"))
        .await
        .unwrap();
    let id = step.to_string();

    for name in ["gone", "nobody"] {
        let ran = z29c(
            &pool,
            &["step", "cancel", &id, "--as", name, "--reason", "stop"],
        )
        .await;
        assert_eq!(ran.exit, Exit::Usage, "{name}");
        assert!(
            ran.err
                .contains(&format!("No enabled operator is named `{name}`")),
            "{}",
            ran.err
        );
    }
    assert_eq!(state_of(&pool, step).await, "review_required");
    assert!(audit_of(&pool, step).await.is_empty());
}

#[sqlx::test(migrator = "engine::db::MIGRATOR")]
async fn a_stale_if_version_is_refused_and_a_current_one_acts(pool: PgPool) {
    let step = step_under_review(&pool, ContractKind::Idempotent).await;
    engine::operators::add(&pool, "ana", Role::Approver)
        .await
        .unwrap();
    let id = step.to_string();
    let shown = z29c(&pool, &["step", "show", &id, "--json"]).await;
    let version = serde_json::from_str::<serde_json::Value>(&shown.out).unwrap()["version"]
        .as_i64()
        .unwrap();

    let stale = (version - 1).to_string();
    let ran = z29c(
        &pool,
        &[
            "step",
            "waive",
            &id,
            "--as",
            "ana",
            "--reason",
            "r",
            "--if-version",
            &stale,
            "--residual-uncertainty",
            "may have been sent",
        ],
    )
    .await;
    assert_eq!(ran.exit, Exit::Refused, "{}", ran.out);
    assert_eq!(state_of(&pool, step).await, "review_required");

    let current = version.to_string();
    let ran = z29c(
        &pool,
        &[
            "step",
            "waive",
            &id,
            "--as",
            "ana",
            "--reason",
            "r",
            "--if-version",
            &current,
            "--residual-uncertainty",
            "may have been sent",
            "--json",
        ],
    )
    .await;
    assert_eq!(ran.exit, Exit::Done, "{}", ran.err);
    let done: serde_json::Value = serde_json::from_str(&ran.out).unwrap();
    assert_eq!(done["state"], "waived");
    assert_eq!(state_of(&pool, step).await, "waived");
}

#[sqlx::test(migrator = "engine::db::MIGRATOR")]
async fn step_show_json_carries_the_state_and_the_actions_the_role_permits(pool: PgPool) {
    let step = step_under_review(&pool, ContractKind::Idempotent).await;
    engine::operators::add(&pool, "ana", Role::Operator)
        .await
        .unwrap();
    let id = step.to_string();

    let ran = z29c(&pool, &["step", "show", &id, "--as", "ana", "--json"]).await;

    assert_eq!(ran.exit, Exit::Done, "{}", ran.err);
    let shown: serde_json::Value = serde_json::from_str(&ran.out).unwrap();
    assert_eq!(shown["state"], "review_required");
    assert_eq!(shown["step_id"], id.as_str());
    let names = |key: &str| -> Vec<String> {
        shown[key]
            .as_array()
            .unwrap()
            .iter()
            .map(|a| a["action"].as_str().unwrap().to_owned())
            .collect()
    };
    assert_eq!(names("permitted_actions"), ["retry_same_key"]);
    assert_eq!(names("beyond_role"), ["waive", "cancel"]);

    let table = z29c(&pool, &["step", "show", &id]).await;
    assert_eq!(table.exit, Exit::Done, "{}", table.err);
    assert!(
        table.out.contains("review_required (Review required)"),
        "{}",
        table.out
    );
    assert!(table.out.contains("retry_same_key"), "{}", table.out);
}

#[sqlx::test(migrator = "engine::db::MIGRATOR")]
async fn the_queue_lists_a_step_under_review_with_its_counts_and_filters(pool: PgPool) {
    let step = step_under_review(&pool, ContractKind::Opaque).await;

    let ran = z29c(&pool, &["queue", "--json"]).await;
    assert_eq!(ran.exit, Exit::Done, "{}", ran.err);
    let page: serde_json::Value = serde_json::from_str(&ran.out).unwrap();
    assert_eq!(page["rows"][0]["step_id"], step.to_string().as_str());
    assert_eq!(page["rows"][0]["state"], "review_required");
    assert_eq!(page["counts"]["by_state"]["review_required"], 1);
    assert_eq!(page["counts"]["by_adapter"]["letters-opaque"], 1);
    assert_eq!(page["next"], serde_json::Value::Null);

    let filtered = z29c(&pool, &["queue", "--json", "--adapter", "nothing-here"]).await;
    let page: serde_json::Value = serde_json::from_str(&filtered.out).unwrap();
    assert_eq!(page["rows"].as_array().unwrap().len(), 0);

    let table = z29c(&pool, &["queue", "--state", "review_required"]).await;
    assert_eq!(table.exit, Exit::Done, "{}", table.err);
    assert!(table.out.contains(&step.to_string()), "{}", table.out);

    let bad = z29c(&pool, &["queue", "--state", "stuck"]).await;
    assert_eq!(bad.exit, Exit::Usage);
    assert!(bad.err.contains("is not a step state"), "{}", bad.err);
}

#[sqlx::test(migrator = "engine::db::MIGRATOR")]
async fn a_missing_step_or_incident_is_refused_with_its_id(pool: PgPool) {
    let nil = Uuid::nil().to_string();
    let step = z29c(&pool, &["step", "show", &nil]).await;
    assert_eq!(step.exit, Exit::Refused);
    assert!(
        step.err.contains(&format!("No step has the id {nil}")),
        "{}",
        step.err
    );
    let incident = z29c(&pool, &["incident", "show", &nil, "--json"]).await;
    assert_eq!(incident.exit, Exit::Refused);
    assert!(
        incident.err.contains("No incident has the id"),
        "{}",
        incident.err
    );
}

#[sqlx::test(migrator = "engine::db::MIGRATOR")]
async fn token_and_user_lists_print_one_json_object_per_line(pool: PgPool) {
    engine::operators::add(&pool, "ana", Role::Approver)
        .await
        .unwrap();
    let new = engine::store::token::NewToken {
        name: "bot",
        role: Role::Viewer,
        creation_key_prefix: Some("bot-"),
        may_configure: false,
        adapters: None,
        on_behalf_of: None,
    };
    engine::store::token::create(&pool, &new, engine::store::journal::Actor::Engine("test"))
        .await
        .unwrap();

    let mut out = Vec::new();
    let tokens = engine::store::token::list(&pool).await.unwrap();
    server::ops::listing::tokens(&tokens, true, &mut out).unwrap();
    let line: serde_json::Value = serde_json::from_slice(&out).unwrap();
    assert_eq!(line["name"], "bot");
    assert_eq!(line["role"], "viewer");
    assert_eq!(line["creation_key_prefix"], "bot-");

    let mut out = Vec::new();
    let users = engine::operators::list(&pool, engine::store::journal::Actor::Engine("test"))
        .await
        .unwrap();
    server::ops::listing::users(&users, true, &mut out).unwrap();
    let line: serde_json::Value = serde_json::from_slice(&out).unwrap();
    assert_eq!(line["name"], "ana");
    assert_eq!(line["enabled"], true);
}

#[test]
fn completions_print_a_script_for_each_shell_that_completes_z29c() {
    for shell in [
        clap_complete::Shell::Bash,
        clap_complete::Shell::Zsh,
        clap_complete::Shell::Fish,
    ] {
        let mut out = Vec::new();
        server::ops::completions(shell, &mut out);
        let script = String::from_utf8(out).unwrap();
        assert!(script.contains("z29c"), "{shell}");
        assert!(
            script.contains("queue"),
            "{shell}: the operator commands are completed"
        );
    }
}

#[sqlx::test(migrator = "engine::db::MIGRATOR")]
async fn workflows_are_listed_by_creation_key_shown_and_cancelled_as_the_operator(pool: PgPool) {
    let step = step_under_review(&pool, ContractKind::Opaque).await;
    fixture::workflow(&pool, "someone-else").insert().await;
    engine::operators::add(&pool, "ana", Role::Approver)
        .await
        .unwrap();

    let listed = z29c(
        &pool,
        &["workflow", "list", "--creation-key", "cli-test", "--json"],
    )
    .await;
    assert_eq!(listed.exit, Exit::Done, "{}", listed.err);
    let rows: Vec<serde_json::Value> = listed
        .out
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(rows.len(), 1, "{}", listed.out);
    assert_eq!(rows[0]["creation_key"], "cli-test");
    let workflow = rows[0]["id"].as_str().unwrap().to_owned();

    let shown = z29c(&pool, &["workflow", "show", &workflow, "--json"]).await;
    let status: serde_json::Value = serde_json::from_str(&shown.out).unwrap();
    assert_eq!(status["creation_key"], "cli-test");
    assert!(
        status["steps"]
            .as_array()
            .unwrap()
            .iter()
            .any(|s| s["id"] == step.to_string().as_str() && s["state"] == "review_required")
    );

    let ran = z29c(
        &pool,
        &[
            "workflow",
            "cancel",
            &workflow,
            "--as",
            "ana",
            "--reason",
            "customer withdrew",
        ],
    )
    .await;
    assert_eq!(ran.exit, Exit::Done, "{}", ran.err);
    assert_eq!(state_of(&pool, step).await, "cancelled");
    assert_eq!(
        audit_of(&pool, step).await,
        vec![("ana".into(), "operator".into(), "cancel".into())]
    );
}
