//! The definition files shipped in the repository (`definitions/`), compiled into the binary so
//! the demo, the scenario harness and the benches can apply them to a database of their own.
//! A team applies its own files with `z29c apply -f`.

use sqlx::PgPool;

/// Every shipped definition file, by its path in the repository.
pub const DEFINITIONS: [(&str, &str); 3] = [
    (
        "definitions/document_delivery.v1.yaml",
        include_str!("../../definitions/document_delivery.v1.yaml"),
    ),
    (
        "definitions/document_delivery.v2.yaml",
        include_str!("../../definitions/document_delivery.v2.yaml"),
    ),
    (
        "definitions/payment_receipt.v1.yaml",
        include_str!("../../definitions/payment_receipt.v1.yaml"),
    ),
];

/// Applies every shipped definition; those already applied are left as they are.
pub async fn apply_definitions(pool: &PgPool) -> anyhow::Result<()> {
    for (path, source) in DEFINITIONS {
        engine::definition::apply(
            pool,
            source,
            engine::store::journal::Actor::Engine("z29c"),
            engine::definition::ApplyOptions {
                allow_missing_adapters: true,
                ..Default::default()
            },
        )
        .await
        .map_err(|e| match e {
            // A demo database made by an earlier Z29C holds an earlier shipped file under this
            // name and version (definitions never change once applied).
            engine::definition::ApplyError::Changed { name, version, .. } => anyhow::anyhow!(
                "{path}: this database holds another `{name}` v{version}, applied by an earlier \
                 version of Z29C; the demo's private cluster is disposable: remove its data \
                 directory (.z29c by default) and start again"
            ),
            other => anyhow::anyhow!("{path}: {other}"),
        })?;
    }
    Ok(())
}
