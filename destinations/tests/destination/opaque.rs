use destinations::protocol::{Accepted, code};
use destinations::{Kind, MIGRATOR};
use sqlx::PgPool;

use crate::client::{delivery, start};

#[sqlx::test(migrator = "MIGRATOR")]
async fn two_identical_creates_make_two_deliveries(pool: PgPool) {
    let (destination, client) = start(pool, Kind::Opaque).await;
    let request = delivery("w-30/deliver-v1", "letter");

    let first = client.deliver(Some("same-key"), &request).await.response();
    let second = client.deliver(Some("same-key"), &request).await.response();

    assert_eq!((first.status, second.status), (201, 201));
    let (first, second): (Accepted, Accepted) = (first.json(), second.json());
    assert_ne!(first.external_reference, second.external_reference);
    let ledger = destination.ledger().await.unwrap();
    assert_eq!(ledger.deliveries_for("w-30/deliver-v1").count(), 2);
}

#[sqlx::test(migrator = "MIGRATOR")]
async fn only_the_queryable_kind_offers_lookups(pool: PgPool) {
    for kind in [Kind::Opaque, Kind::Idempotent] {
        let (_destination, client) = start(pool.clone(), kind).await;

        let answer = client.look_up("w-31/deliver-v1", None).await.response();

        assert_eq!(answer.status, 501, "{kind}");
        assert_eq!(answer.code(), code::LOOKUP_NOT_SUPPORTED);
    }
}
