//! The demo's document deliveries (`document_delivery`): through every protocol destination,
//! with answers delayed, dropped, spoiled and refused, and two duplicates left by an earlier
//! system.

use destinations::{Fault, FaultRule, Match, Operation};
use engine::intake::{NewWorkflow, Started, start_workflow};
use engine::store::journal::Actor;
use serde_json::json;
use sqlx::PgPool;

use super::{Endpoints, Plans, step_key};

/// One demo workflow: what to deliver, through which adapter, with which fault.
struct Scene {
    key: &'static str,
    adapter: &'static str,
    title: &'static str,
    fault: Option<Fault>,
    /// Deliver once before Z29C does, under the same client reference (an earlier system's
    /// attempt), so the lookup finds two deliveries: a duplicate-effect incident.
    predecessor: bool,
}

/// Every demo workflow, in the order they are started.
fn scenes() -> Vec<Scene> {
    [reports(), invoices(), letters(), statements(), notices()]
        .into_iter()
        .flatten()
        .collect()
}

/// One scene, by its fields in order.
fn scene(
    key: &'static str,
    adapter: &'static str,
    title: &'static str,
    fault: Option<Fault>,
    predecessor: bool,
) -> Scene {
    Scene {
        key,
        adapter,
        title,
        fault,
        predecessor,
    }
}

/// The reports, through the idempotent destination: on time, answered late, answer lost.
fn reports() -> Vec<Scene> {
    vec![
        scene(
            "demo-report-1",
            "idempotent-docs",
            "Quarterly report",
            None,
            false,
        ),
        scene(
            "demo-report-2",
            "idempotent-docs",
            "Annual report",
            Some(Fault::DelayResponse { ms: 3_000 }),
            false,
        ),
        scene(
            "demo-report-3",
            "idempotent-docs",
            "Board minutes",
            Some(Fault::DropResponse {}),
            false,
        ),
    ]
}

/// The invoices, through the queryable destination; two were already delivered once by an
/// earlier system, so their lookups find a duplicate.
fn invoices() -> Vec<Scene> {
    vec![
        scene(
            "demo-invoice-1",
            "queryable-docs",
            "Invoice 1001",
            None,
            false,
        ),
        scene(
            "demo-invoice-2",
            "queryable-docs",
            "Invoice 1002",
            Some(Fault::DropResponse {}),
            false,
        ),
        scene(
            "demo-invoice-3",
            "queryable-docs",
            "Invoice 1003",
            Some(Fault::DropResponse {}),
            true,
        ),
        scene(
            "demo-invoice-4",
            "queryable-docs",
            "Invoice 1004",
            Some(Fault::DropResponse {}),
            true,
        ),
    ]
}

/// The letters, through the opaque destination, which offers no way to learn what happened.
fn letters() -> Vec<Scene> {
    vec![
        scene(
            "demo-letter-1",
            "opaque-docs",
            "Welcome letter",
            None,
            false,
        ),
        scene(
            "demo-letter-2",
            "opaque-docs",
            "Contract letter",
            Some(Fault::DelayResponse { ms: 3_000 }),
            false,
        ),
        scene(
            "demo-letter-3",
            "opaque-docs",
            "Reminder letter",
            Some(Fault::ErrorAfterAccept { status: 502 }),
            false,
        ),
        scene(
            "demo-letter-4",
            "opaque-docs",
            "Renewal letter",
            Some(Fault::DelayResponse { ms: 3_000 }),
            false,
        ),
        scene(
            "demo-letter-5",
            "opaque-docs",
            "Farewell letter",
            Some(Fault::DropResponse {}),
            false,
        ),
        scene(
            "demo-letter-6",
            "opaque-docs",
            "Holiday letter",
            Some(Fault::DelayResponse { ms: 3_000 }),
            false,
        ),
    ]
}

/// The statements, through the adapters whose contract sends every unknown outcome to review.
fn statements() -> Vec<Scene> {
    vec![
        scene(
            "demo-statement-1",
            "idempotent-reviewed",
            "March statement",
            Some(Fault::DelayResponse { ms: 3_000 }),
            false,
        ),
        scene(
            "demo-statement-3",
            "idempotent-reviewed",
            "May statement",
            Some(Fault::DelayResponse { ms: 3_000 }),
            false,
        ),
        scene(
            "demo-statement-4",
            "idempotent-reviewed",
            "June statement",
            Some(Fault::DropResponse {}),
            false,
        ),
        scene(
            "demo-statement-2",
            "queryable-reviewed",
            "April statement",
            Some(Fault::DropResponse {}),
            false,
        ),
    ]
}

/// The notices: one rejected outright by the destination.
fn notices() -> Vec<Scene> {
    vec![scene(
        "demo-notice-1",
        "idempotent-docs",
        "Price notice",
        Some(Fault::Reject {
            code: "recipient_unknown".into(),
            retryable: false,
        }),
        false,
    )]
}

/// Starts the document workflows not started yet, delivering the predecessors' documents and
/// adding each scene's fault to `plans`; returns how many it started.
pub(super) async fn seed(
    pool: &PgPool,
    endpoints: &Endpoints,
    plans: &mut Plans,
) -> anyhow::Result<usize> {
    let client = reqwest::Client::new();
    let mut created = 0;
    for scene in scenes() {
        let input = json!({
            "adapter": scene.adapter,
            "recipient": "customer-42",
            "document": { "title": scene.title, "body": format!("{}: generated for the Z29C demo.", scene.title) },
        });
        let started = start_workflow(
            pool,
            NewWorkflow {
                creation_key: scene.key.to_owned(),
                definition: "document_delivery".to_owned(),
                version: None,
                input,
            },
            Actor::Engine("demo"),
        )
        .await?;
        let Started::Created(workflow) = started else {
            continue;
        };
        created += 1;
        let key = step_key(workflow.id, "deliver", workflow.definition_version);
        let base_url = endpoints.of_adapter(scene.adapter);
        if scene.predecessor {
            // The same document, already delivered once under this reference.
            let definition = engine::definition::Catalog::get(
                pool,
                "document_delivery",
                workflow.definition_version,
            )
            .await?;
            let rendered = definition.run_pure("render", &workflow.input, &json!({}))?;
            client
                .post(format!("{base_url}/deliveries"))
                .json(&json!({
                    "client_reference": key,
                    "digest": rendered["document_digest"],
                    "recipient": "customer-42",
                    "summary": format!("Document \"{}\" (sent by the previous system)", scene.title),
                }))
                .send()
                .await?
                .error_for_status()?;
        }
        if let Some(fault) = scene.fault {
            let matching = if scene.adapter.starts_with("idempotent") {
                Match::IdempotencyKey(key)
            } else {
                Match::ClientReference(key)
            };
            plans
                .entry(base_url.to_owned())
                .or_default()
                .push(FaultRule::new(Operation::Deliver, matching, fault).times(1));
        }
    }
    Ok(created)
}
