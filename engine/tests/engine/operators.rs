//! Operator accounts: argon2 hashes, one-time passwords, sign-in checks.

use crate::support::fixture;
use engine::domain::Role;
use engine::operators::{self, OperatorError};
use sqlx::PgPool;

#[sqlx::test(migrator = "engine::db::MIGRATOR")]
async fn an_operator_signs_in_with_the_password_printed_once_and_nothing_else(pool: PgPool) {
    let password = operators::add(&pool, "ada", Role::Approver).await.unwrap();
    let stored: String =
        sqlx::query_scalar("select password_hash from operator where username = 'ada'")
            .fetch_one(&pool)
            .await
            .unwrap();
    assert!(stored.starts_with("$argon2"), "{stored}");
    assert!(!stored.contains(&password));

    let ada = operators::authenticate(&pool, "ada", &password)
        .await
        .unwrap()
        .unwrap();
    assert_eq!((ada.username.as_str(), ada.role), ("ada", Role::Approver));
    assert_eq!(
        operators::authenticate(&pool, "ada", "guess")
            .await
            .unwrap(),
        None
    );
    assert_eq!(
        operators::authenticate(&pool, "nobody", &password)
            .await
            .unwrap(),
        None
    );

    fixture::disable_operator(&pool, "ada").await;
    assert_eq!(
        operators::authenticate(&pool, "ada", &password)
            .await
            .unwrap(),
        None
    );
}

#[sqlx::test(migrator = "engine::db::MIGRATOR")]
async fn usernames_are_unique_and_well_formed(pool: PgPool) {
    operators::add(&pool, "ada", Role::Viewer).await.unwrap();
    assert!(matches!(
        operators::add(&pool, "ada", Role::Operator).await,
        Err(OperatorError::Exists(_))
    ));
    for bad in ["", "Ada", "-ada", "a b", "ada;drop"] {
        assert!(
            matches!(
                operators::add(&pool, bad, Role::Viewer).await,
                Err(OperatorError::BadUsername)
            ),
            "{bad}"
        );
    }
}
