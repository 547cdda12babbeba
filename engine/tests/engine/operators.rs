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

#[sqlx::test(migrator = "engine::db::MIGRATOR")]
async fn an_unknown_name_and_a_wrong_password_each_run_exactly_one_verification(pool: PgPool) {
    let password = operators::add(&pool, "ada", Role::Viewer).await.unwrap();
    assert_eq!(password.len(), 32, "128 bits as hex: {password}");
    assert!(
        password.chars().all(|c| c.is_ascii_hexdigit()),
        "{password}"
    );
    // The first check of the process hashes the dummy that unknown names are checked against.
    operators::authenticate(&pool, "ada", "warm-up")
        .await
        .unwrap();
    for (name, guess) in [
        ("nobody", "guess"),
        ("ada", "guess"),
        ("nobody", "guess"),
        ("ada", password.as_str()),
    ] {
        let (hashes, verifications) = operators::argon2_runs();
        operators::authenticate(&pool, name, guess).await.unwrap();
        let (hashes_after, verifications_after) = operators::argon2_runs();
        assert_eq!(
            (hashes_after - hashes, verifications_after - verifications),
            (0, 1),
            "{name}: no hash, one verification"
        );
    }
}

#[test]
fn the_wait_doubles_from_the_fifth_failure_and_stops_at_fifteen_minutes() {
    use operators::{FREE_FAILURES_PER_NAME as FREE, SignIn, ThrottledBy, wait_seconds};
    let waits: Vec<i64> = [0, 4, 5, 6, 10, 14, 15, 200]
        .into_iter()
        .map(|n| wait_seconds(n, FREE))
        .collect();
    assert_eq!(waits, [0, 0, 1, 2, 32, 512, 900, 900]);
    let refusal = |seconds| {
        SignIn::Throttled {
            by: ThrottledBy::Account,
            seconds,
        }
        .refusal()
        .unwrap()
    };
    assert_eq!(
        refusal(32),
        "Too many failed sign-ins for this account; try again in 32 seconds."
    );
    assert_eq!(
        refusal(900),
        "Too many failed sign-ins for this account; try again in 15 minutes."
    );
}

#[sqlx::test(migrator = "engine::db::MIGRATOR")]
async fn twenty_failures_from_one_address_make_every_name_wait_there_but_not_elsewhere(
    pool: PgPool,
) {
    use operators::{SignIn, ThrottledBy};
    // A loopback address, which this process's own limiter leaves to the count every server
    // process shares: it stands for an address whose attempts reached several processes.
    let address = "127.0.0.7";
    let password = operators::add(&pool, "ada", Role::Viewer).await.unwrap();
    for n in 0..20 {
        let name = format!("guess-{n}");
        let outcome = operators::sign_in(&pool, &name, "x", address)
            .await
            .unwrap();
        assert_eq!(outcome, SignIn::Refused, "{name}");
    }
    let throttled = operators::sign_in(&pool, "ada", &password, address)
        .await
        .unwrap();
    assert_eq!(
        throttled,
        SignIn::Throttled {
            by: ThrottledBy::Address,
            seconds: 1
        }
    );
    for address in ["127.0.0.8", operators::UNKNOWN_ADDRESS] {
        let outcome = operators::sign_in(&pool, "ada", &password, address)
            .await
            .unwrap();
        assert!(
            matches!(outcome, SignIn::SignedIn(_)),
            "{address}: {outcome:?}"
        );
    }
    let recorded: Vec<(bool, i64)> = sqlx::query_as(
        "select succeeded, count(*) from sign_in_attempt group by succeeded order by succeeded",
    )
    .fetch_all(&pool)
    .await
    .unwrap();
    assert_eq!(recorded, [(false, 21), (true, 2)]);
}

#[sqlx::test(migrator = "engine::db::MIGRATOR")]
async fn accounts_are_disabled_enabled_given_roles_and_new_passwords_each_audited(pool: PgPool) {
    use engine::store::journal::Actor;
    let cli = Actor::Engine("cli");
    let first = operators::add(&pool, "ada", Role::Approver).await.unwrap();
    operators::add(&pool, "bob", Role::Viewer).await.unwrap();
    let ada = operators::authenticate(&pool, "ada", &first)
        .await
        .unwrap()
        .unwrap();

    // A session ada signed in to a few seconds ago.
    let signed_in = chrono::Utc::now() - chrono::Duration::seconds(5);
    operators::disable(&pool, "ada", cli).await.unwrap();
    assert_eq!(
        operators::standing(&pool, ada.id, signed_in).await.unwrap(),
        None
    );
    let listed = operators::list(&pool, cli).await.unwrap();
    let names: Vec<(&str, Role, bool)> = listed
        .iter()
        .map(|a| (a.username.as_str(), a.role, a.disabled_at.is_some()))
        .collect();
    assert_eq!(
        names,
        [("ada", Role::Approver, true), ("bob", Role::Viewer, false)]
    );
    operators::enable(&pool, "ada", cli).await.unwrap();
    assert_eq!(
        operators::set_role(&pool, "ada", Role::Viewer, cli)
            .await
            .unwrap(),
        Role::Approver
    );
    assert_eq!(
        operators::standing(&pool, ada.id, signed_in).await.unwrap(),
        Some(Role::Viewer)
    );
    let second = operators::reset_password(&pool, "ada", cli).await.unwrap();
    assert_ne!(first, second);
    // The reset ends the session signed in before it; one signed in after it stands.
    assert_eq!(
        operators::standing(&pool, ada.id, signed_in).await.unwrap(),
        None
    );
    let later = chrono::Utc::now() + chrono::Duration::seconds(1);
    assert_eq!(
        operators::standing(&pool, ada.id, later).await.unwrap(),
        Some(Role::Viewer)
    );
    assert_eq!(
        operators::authenticate(&pool, "ada", &first).await.unwrap(),
        None
    );
    assert!(
        operators::authenticate(&pool, "ada", &second)
            .await
            .unwrap()
            .is_some()
    );
    for missing in [
        operators::disable(&pool, "nobody", cli).await.err(),
        operators::set_role(&pool, "nobody", Role::Viewer, cli)
            .await
            .err(),
        operators::reset_password(&pool, "nobody", cli).await.err(),
    ] {
        assert!(matches!(missing, Some(OperatorError::NotFound(_))));
    }

    let audited: Vec<(String, String, String, serde_json::Value)> =
        sqlx::query_as("select actor, actor_kind, action, details from audit order by id")
            .fetch_all(&pool)
            .await
            .unwrap();
    let actions: Vec<&str> = audited.iter().map(|(_, _, a, _)| a.as_str()).collect();
    assert_eq!(
        actions,
        [
            "operator_disabled",
            "operator_listed",
            "operator_enabled",
            "operator_role_set",
            "operator_password_reset"
        ]
    );
    assert!(
        audited
            .iter()
            .all(|(a, k, _, _)| (a.as_str(), k.as_str()) == ("cli", "engine"))
    );
    assert_eq!(
        audited[3].3,
        serde_json::json!({"username": "ada", "from": "approver", "to": "viewer"})
    );
}

#[test]
fn the_anonymous_form_token_is_an_hmac_that_expires_and_resists_tampering() {
    use operators::form_token::{MAX_AGE_SECONDS, hmac_sha256, issue_at, same, verify_at};
    // RFC 4231, test case 2.
    assert_eq!(
        hex::encode(hmac_sha256(b"Jefe", b"what do ya want for nothing?")),
        "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"
    );
    let key = [7u8; 32];
    let issued = 1_800_000_000;
    let token = issue_at(&key, issued);
    assert!(verify_at(&key, &token, issued + 60));
    assert!(verify_at(&key, &token, issued + MAX_AGE_SECONDS));
    assert!(!verify_at(&key, &token, issued + MAX_AGE_SECONDS + 1));
    assert!(!verify_at(&[8u8; 32], &token, issued + 60));
    let later = token.replacen(&issued.to_string(), &(issued + 1).to_string(), 1);
    assert!(!verify_at(&key, &later, issued + 60));
    assert!(!verify_at(&key, "", issued));
    assert!(same(b"abc", b"abc") && !same(b"abc", b"abd") && !same(b"abc", b"ab"));
}

#[sqlx::test(migrator = "engine::db::MIGRATOR")]
async fn sign_in_attempts_older_than_throttling_can_count_are_forgotten(pool: PgPool) {
    sqlx::query(
        "insert into sign_in_attempt (username, address, at) values
           ('ada', 'unknown', now() - interval '2 hours'),
           ('ada', 'unknown', now() - interval '10 minutes')",
    )
    .execute(&pool)
    .await
    .unwrap();

    let forgotten = engine::operators::forget_old_attempts(&pool).await.unwrap();

    assert_eq!(forgotten, 1);
    let left: i64 = sqlx::query_scalar("select count(*) from sign_in_attempt")
        .fetch_one(&pool)
        .await
        .unwrap();
    assert_eq!(left, 1);
}

#[sqlx::test(migrator = "engine::db::MIGRATOR")]
async fn a_flood_from_one_address_is_refused_in_memory_before_any_row_is_written(pool: PgPool) {
    use operators::{SignIn, ThrottledBy};
    for n in 0..40 {
        let outcome = operators::sign_in(&pool, &format!("guess-{n}"), "x", "2001:db8:7::1")
            .await
            .unwrap();
        if n < 10 {
            assert_eq!(outcome, SignIn::Refused, "{n}");
        } else {
            assert!(
                matches!(
                    outcome,
                    SignIn::Throttled {
                        by: ThrottledBy::Address,
                        ..
                    }
                ),
                "{n}: {outcome:?}"
            );
        }
    }
    // Another address of the same /64 waits with it.
    let neighbour = operators::sign_in(&pool, "guess", "x", "2001:db8:7::2")
        .await
        .unwrap();
    assert!(
        matches!(neighbour, SignIn::Throttled { .. }),
        "{neighbour:?}"
    );
    let written: (i64, i64) = sqlx::query_as(
        "select (select count(*) from sign_in_attempt), (select coalesce(sum(failures), 0) from sign_in_failure)",
    )
    .fetch_one(&pool)
    .await
    .unwrap();
    assert_eq!(
        written,
        (10, 10),
        "only the ten admitted attempts reached the database"
    );
}
