//! `/api/v1/definitions` and `/api/v1/adapters`: configuration applied over HTTP, with the
//! refusals `z29c apply` gives, by tokens that may configure and by no others.

use axum::http::StatusCode;
use engine::domain::Role;
use engine::store::journal::Actor;
use engine::store::token::NewToken;
use serde_json::Value;
use sqlx::PgPool;

use crate::api::{call, token};

/// A token that may configure (`z29c token create NAME --configure`), with the viewer role:
/// configuration is a privilege apart from recovery.
async fn deployer(pool: &PgPool, name: &str) -> String {
    let new = NewToken {
        name,
        role: Role::Viewer,
        creation_key_prefix: None,
        may_configure: true,
        adapters: None,
        on_behalf_of: None,
    };
    engine::store::token::create(pool, &new, Actor::Engine("test"))
        .await
        .unwrap()
}

const V1: &str = include_str!("../../../definitions/document_delivery.v1.yaml");
const OPAQUE_DOCS: &str = include_str!("../../../adapters/opaque-docs.yaml");

#[sqlx::test(migrator = "engine::db::MIGRATOR")]
async fn a_deployer_applies_a_definition_once_and_again_changes_nothing(pool: PgPool) {
    let approver = deployer(&pool, "deploy").await;
    let path = "/api/v1/definitions/document_delivery/1";

    let (status, first) = call(&pool, "PUT", path, Some(&approver), Some(V1.into())).await;
    assert_eq!(status, StatusCode::CREATED, "{first}");
    assert_eq!(first["result"], "added");
    let (status, again) = call(&pool, "PUT", path, Some(&approver), Some(V1.into())).await;
    assert_eq!(status, StatusCode::OK, "{again}");
    assert_eq!(again["result"], "unchanged");

    let (_, listed) = call(&pool, "GET", "/api/v1/definitions", Some(&approver), None).await;
    assert_eq!(listed[0]["name"], "document_delivery");
    assert_eq!(listed[0]["applied_by"], "token:deploy");
}

#[sqlx::test(migrator = "engine::db::MIGRATOR")]
async fn changing_an_applied_version_is_refused_with_the_diff(pool: PgPool) {
    let approver = deployer(&pool, "deploy").await;
    let path = "/api/v1/definitions/document_delivery/1";
    call(&pool, "PUT", path, Some(&approver), Some(V1.into())).await;

    let changed = V1.replace("Delivers a document, then", "Delivers a letter, then");
    let (status, body) = call(&pool, "PUT", path, Some(&approver), Some(changed)).await;

    assert_eq!(status, StatusCode::CONFLICT, "{body}");
    let error = body["error"].as_str().unwrap();
    assert!(error.contains("give the change a new version"), "{error}");
    assert!(
        error.contains("+description: Delivers a letter, then"),
        "{error}"
    );
}

#[sqlx::test(migrator = "engine::db::MIGRATOR")]
async fn a_broken_file_or_another_name_than_the_paths_is_refused_and_nothing_stored(pool: PgPool) {
    let approver = deployer(&pool, "deploy").await;
    let unknown_field = V1.replace("status_step: deliver", "status_step: deliver\nretries: 3");
    let (status, body) = call(
        &pool,
        "PUT",
        "/api/v1/definitions/document_delivery/1",
        Some(&approver),
        Some(unknown_field),
    )
    .await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{body}");
    assert!(
        body["error"].as_str().unwrap().starts_with("line "),
        "{body}"
    );

    let (status, body) = call(
        &pool,
        "PUT",
        "/api/v1/definitions/payments/1",
        Some(&approver),
        Some(V1.into()),
    )
    .await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{body}");
    let stored: i64 = sqlx::query_scalar("select count(*) from definition")
        .fetch_one(&pool)
        .await
        .unwrap();
    assert_eq!(stored, 0);
}

#[sqlx::test(migrator = "engine::db::MIGRATOR")]
async fn an_approver_token_changes_no_definition_and_no_adapter(pool: PgPool) {
    let approver = token(&pool, "ops", Role::Approver, None).await;

    for (path, file) in [
        ("/api/v1/definitions/document_delivery/1", V1),
        ("/api/v1/adapters/opaque-docs", OPAQUE_DOCS),
    ] {
        let (status, body) = call(&pool, "PUT", path, Some(&approver), Some(file.into())).await;
        assert_eq!(status, StatusCode::FORBIDDEN, "{path}: {body}");
        assert_eq!(body["code"], "forbidden");
        assert!(
            body["error"].as_str().unwrap().contains("--configure"),
            "{body}"
        );
    }
    let stored: (i64, i64) =
        sqlx::query_as("select (select count(*) from definition), (select count(*) from adapter)")
            .fetch_one(&pool)
            .await
            .unwrap();
    assert_eq!(stored, (0, 0));
}

#[sqlx::test(migrator = "engine::db::MIGRATOR")]
async fn a_prefixed_token_reads_no_configuration_and_none_may_configure(pool: PgPool) {
    let team = token(&pool, "team-a", Role::Approver, Some("team-a-")).await;
    for path in ["/api/v1/adapters", "/api/v1/definitions"] {
        let (status, body) = call(&pool, "GET", path, Some(&team), None).await;
        assert_eq!(status, StatusCode::FORBIDDEN, "{path}: {body}");
    }
    let scoped_deployer = NewToken {
        name: "team-a-deploy",
        role: Role::Viewer,
        creation_key_prefix: Some("team-a-"),
        may_configure: true,
        adapters: None,
        on_behalf_of: None,
    };
    let refused = engine::store::token::create(&pool, &scoped_deployer, Actor::Engine("test"))
        .await
        .unwrap_err();
    assert!(
        refused.to_string().contains("creation-key prefix"),
        "{refused}"
    );
}

#[sqlx::test(migrator = "engine::db::MIGRATOR")]
async fn every_applied_file_is_audited_with_who_applied_it_and_its_diff(pool: PgPool) {
    let deploy = deployer(&pool, "deploy").await;
    let path = "/api/v1/adapters/opaque-docs";
    call(&pool, "PUT", path, Some(&deploy), Some(OPAQUE_DOCS.into())).await;
    let slower = OPAQUE_DOCS.replace("deadline_ms: 2000", "deadline_ms: 4000");
    call(&pool, "PUT", path, Some(&deploy), Some(slower.clone())).await;
    call(&pool, "PUT", path, Some(&deploy), Some(slower)).await;
    let (status, _) = call(
        &pool,
        "PUT",
        "/api/v1/definitions/document_delivery/1",
        Some(&deploy),
        Some(V1.into()),
    )
    .await;
    assert_eq!(status, StatusCode::CREATED);

    let audited: Vec<(String, String, String, Value)> = sqlx::query_as(
        "select actor, actor_kind, action, details from audit
         where action in ('adapter_apply', 'definition_apply') order by id",
    )
    .fetch_all(&pool)
    .await
    .unwrap();
    assert_eq!(
        audited.len(),
        3,
        "the unchanged file is no change: {audited:?}"
    );
    for (actor, kind, _, _) in &audited {
        assert_eq!((actor.as_str(), kind.as_str()), ("deploy", "api"));
    }
    let (_, _, action, changed) = &audited[1];
    assert_eq!(
        (action.as_str(), &changed["version"]),
        ("adapter_apply", &Value::from(2))
    );
    let diff = changed["diff"].as_str().unwrap();
    assert!(
        diff.contains("-deadline_ms: 2000") && diff.contains("+deadline_ms: 4000"),
        "{diff}"
    );
    assert_eq!(audited[2].2, "definition_apply");
}

#[sqlx::test(migrator = "engine::db::MIGRATOR")]
async fn a_base_url_at_the_cloud_metadata_address_is_refused(pool: PgPool) {
    let deploy = deployer(&pool, "deploy").await;
    for address in ["169.254.169.254", "[fd00:ec2::254]"] {
        let pointed = OPAQUE_DOCS.replace(
            "base_url: http://127.0.0.1:4103",
            &format!("base_url: http://{address}"),
        );
        assert_ne!(pointed, OPAQUE_DOCS);
        let (status, body) = call(
            &pool,
            "PUT",
            "/api/v1/adapters/opaque-docs",
            Some(&deploy),
            Some(pointed),
        )
        .await;
        assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{body}");
        let error = body["error"].as_str().unwrap();
        assert!(error.contains("egress policy"), "{error}");
        assert!(error.starts_with("line 5"), "{error}");
    }
}

#[sqlx::test(migrator = "engine::db::MIGRATOR")]
async fn a_secret_file_outside_the_secrets_directory_is_refused_alike_whether_it_exists_or_not(
    pool: PgPool,
) {
    crate::support::allow_temporary_secrets();
    let deploy = deployer(&pool, "deploy").await;
    let payments = include_str!("../../../adapters/payments.yaml");
    let mut errors = Vec::new();
    for path in ["/etc/passwd", "/etc/no-such-file", "/tmp/../etc/passwd"] {
        let file = payments.replace(
            "{ env: Z29C_PAYMENTS_API_KEY }",
            &format!("{{ file: {path} }}"),
        );
        let (status, body) = call(
            &pool,
            "PUT",
            "/api/v1/adapters/payments",
            Some(&deploy),
            Some(file),
        )
        .await;
        assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{body}");
        let error = body["error"].as_str().unwrap().replace(path, "PATH");
        assert!(
            error.contains("not inside the secrets directory"),
            "{error}"
        );
        errors.push(error);
    }
    assert_eq!(
        errors[0], errors[1],
        "the answer tells nothing of which files exist"
    );
}

#[sqlx::test(migrator = "engine::db::MIGRATOR")]
async fn a_base_url_from_the_environment_is_stored_and_shown_as_the_reference_never_its_value(
    pool: PgPool,
) {
    let deploy = deployer(&pool, "deploy").await;
    let file = OPAQUE_DOCS.replace("base_url: http://127.0.0.1:4103", "base_url: { env: PATH }");
    let (status, body) = call(
        &pool,
        "PUT",
        "/api/v1/adapters/opaque-docs",
        Some(&deploy),
        Some(file),
    )
    .await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    let (_, listed) = call(&pool, "GET", "/api/v1/adapters", Some(&deploy), None).await;
    assert_eq!(listed[0]["base_url"], "{ env: PATH }");
    let stored: String = sqlx::query_scalar("select base_url from adapter")
        .fetch_one(&pool)
        .await
        .unwrap();
    assert_eq!(stored, "{ env: PATH }");
}

#[sqlx::test(migrator = "engine::db::MIGRATOR")]
async fn an_adapter_file_put_twice_is_one_version_and_a_changed_one_the_next_unverified(
    pool: PgPool,
) {
    let approver = deployer(&pool, "deploy").await;
    let path = "/api/v1/adapters/opaque-docs";

    let (status, first) = call(
        &pool,
        "PUT",
        path,
        Some(&approver),
        Some(OPAQUE_DOCS.into()),
    )
    .await;
    assert_eq!(status, StatusCode::CREATED, "{first}");
    let (status, again) = call(
        &pool,
        "PUT",
        path,
        Some(&approver),
        Some(OPAQUE_DOCS.into()),
    )
    .await;
    assert_eq!(
        (status, again["result"].as_str()),
        (StatusCode::OK, Some("unchanged"))
    );
    let slower = OPAQUE_DOCS.replace("deadline_ms: 2000", "deadline_ms: 4000");
    let (status, changed) = call(&pool, "PUT", path, Some(&approver), Some(slower)).await;
    assert_eq!(status, StatusCode::CREATED, "{changed}");
    assert_eq!(changed["version"], 2);

    let (_, listed) = call(&pool, "GET", "/api/v1/adapters", Some(&approver), None).await;
    assert_eq!(listed[0]["version"], 2);
    assert_eq!(
        listed[0]["verified_version"],
        Value::Null,
        "a new version is unverified"
    );
}

#[sqlx::test(migrator = "engine::db::MIGRATOR")]
async fn an_adapter_file_is_refused_for_an_operator_or_under_another_name(pool: PgPool) {
    let operator = token(&pool, "ops", Role::Operator, None).await;
    let approver = deployer(&pool, "deploy").await;

    let (status, _) = call(
        &pool,
        "PUT",
        "/api/v1/adapters/opaque-docs",
        Some(&operator),
        Some(OPAQUE_DOCS.into()),
    )
    .await;
    assert_eq!(status, StatusCode::FORBIDDEN);
    let (status, body) = call(
        &pool,
        "PUT",
        "/api/v1/adapters/payments",
        Some(&approver),
        Some(OPAQUE_DOCS.into()),
    )
    .await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{body}");
    let stored: i64 = sqlx::query_scalar("select count(*) from adapter")
        .fetch_one(&pool)
        .await
        .unwrap();
    assert_eq!(stored, 0);
}

#[sqlx::test(migrator = "engine::db::MIGRATOR")]
async fn a_yaml_alias_bomb_is_refused_before_it_is_built(pool: PgPool) {
    let deploy = deployer(&pool, "deploy").await;
    // One anchor of 20,000 values replayed 2,000 times: 40 million values from under 100 KiB.
    let anchor = vec!["1"; 20_000].join(",");
    let aliases = vec!["*a"; 2_000].join(",");
    let bomb = format!("name: opaque-docs\nx: &a [{anchor}]\ny: [{aliases}]\n");
    for path in [
        "/api/v1/adapters/opaque-docs",
        "/api/v1/definitions/document_delivery/1",
    ] {
        let (status, body) = call(&pool, "PUT", path, Some(&deploy), Some(bomb.clone())).await;
        assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{path}: {body}");
        assert!(
            body["error"]
                .as_str()
                .unwrap()
                .contains("once its aliases are expanded"),
            "{path}: {body}"
        );
    }
}
