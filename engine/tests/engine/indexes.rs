//! The happy path writes few index entries (docs/DESIGN.md §4, §10): no index of a table whose
//! rows it updates names a column those updates change, so each update can be HOT (one index
//! excepted, for its readers), and an outbox event is indexed once, by its position.

use sqlx::PgPool;

/// The columns the happy path changes in the rows it updates, by table.
const CHANGED_ON_THE_HAPPY_PATH: &[(&str, &[&str])] = &[
    (
        "step",
        &[
            "state",
            "lease_holder",
            "lease_id",
            "attempt_count",
            "receipt_id",
            "output",
            "run_after",
            "updated_at",
        ],
    ),
    (
        "workflow",
        &["state", "revision", "updated_at", "settled_at"],
    ),
    (
        "status_projection",
        &["revision", "state", "sentence", "updated_at"],
    ),
];

/// The indexes kept although the happy path changes a column they name: the workflow list
/// filtered by a state few or no workflows are in reads `workflow_state_idx`; the archiver walks
/// settled workflows by `workflow_settled_idx`, whose column changes only with `state`, in the
/// update that settles a workflow (never HOT, for the index above).
const KEPT_FOR_READERS: &[&str] = &["workflow_state_idx", "workflow_settled_idx"];

/// The definitions of `table`'s indexes but those named in `except`, as PostgreSQL prints them.
async fn index_definitions(pool: &PgPool, table: &str, except: &[&str]) -> Vec<String> {
    sqlx::query_scalar(
        "select pg_get_indexdef(indexrelid) from pg_index
         where indrelid = $1::regclass and indexrelid::regclass::text <> all($2) order by 1",
    )
    .bind(table)
    .bind(except)
    .fetch_all(pool)
    .await
    .unwrap()
}

/// Whether an index definition names `column` among its keys, expressions or predicate.
fn names(definition: &str, column: &str) -> bool {
    let (_, indexed) = definition.split_once(" USING ").unwrap();
    indexed
        .split(|c: char| !(c.is_alphanumeric() || c == '_'))
        .any(|word| word == column)
}

#[sqlx::test(migrator = "engine::db::MIGRATOR")]
async fn no_index_of_a_hot_table_names_a_column_the_happy_path_changes(pool: PgPool) {
    for (table, columns) in CHANGED_ON_THE_HAPPY_PATH {
        let existing: Vec<String> = sqlx::query_scalar(
            "select column_name::text from information_schema.columns where table_name = $1",
        )
        .bind(table)
        .fetch_all(&pool)
        .await
        .unwrap();
        for column in *columns {
            assert!(
                existing.iter().any(|c| c == column),
                "{table} has no {column}"
            );
        }
        let definitions = index_definitions(&pool, table, KEPT_FOR_READERS).await;
        assert!(!definitions.is_empty(), "{table} has no index");
        for definition in &definitions {
            for column in *columns {
                assert!(
                    !names(definition, column),
                    "{definition} names {table}.{column}, which the happy path changes"
                );
            }
        }
    }
}

#[sqlx::test(migrator = "engine::db::MIGRATOR")]
async fn an_outbox_event_is_indexed_once_by_its_position(pool: PgPool) {
    assert_eq!(
        index_definitions(&pool, "outbox", &[]).await,
        ["CREATE UNIQUE INDEX outbox_pkey ON public.outbox USING btree (txid, id)"]
    );
}
