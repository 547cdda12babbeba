//! `z29c queue`: the console's review queue, with its filters, counts and open incidents.

use engine::read::queue::{self, QueueCounts, QueueFilter, QueueRow};
use serde_json::{Map, Value, json};
use sqlx::PgPool;

use super::print::{self, Table};
use super::{Io, Stop};
use crate::cli::ops::QueueArgs;

/// The most open incidents listed with the first page; `z29c incident list` pages them all.
const INCIDENTS_SHOWN: i64 = 10;

/// Prints one page of the queue: as a table, or as one JSON document with `rows`, `next` (the
/// cursor of the next page, or null), `counts` and `incidents`.
pub(super) async fn show(pool: &PgPool, args: &QueueArgs, io: &mut Io<'_>) -> Result<(), Stop> {
    let filter = QueueFilter {
        state: args.state,
        adapter: args.adapter.clone(),
        definition: args.definition.clone(),
        older_than_secs: args.older_than.map(|minutes| i64::from(minutes) * 60),
        noted_since: None,
        creation_key_prefix: None,
    };
    let after = args.after.as_deref().map(print::cursor).transpose()?;
    let mut rows = queue::queue(pool, &filter, after, args.limit + 1).await?;
    let next = engine::read::keyset::cut(&mut rows, args.limit, |last| {
        (last.unknown_since, last.step_id)
    })
    .map(engine::read::keyset::format);
    let counts = queue::queue_counts(pool).await?;
    let (incidents, open) = match after {
        None => {
            let page = queue::open_incident_page(pool, INCIDENTS_SHOWN, None, None).await?;
            (page.rows, page.open)
        }
        Some(_) => (Vec::new(), 0),
    };
    if args.output.json {
        let document = json!({
            "rows": rows, "next": next, "counts": counts_json(&counts), "incidents": incidents,
            "incidents_open": open,
        });
        print::json(io.out, &document)?;
        return Ok(());
    }
    write_counts(io, &counts)?;
    write_rows(io, &rows)?;
    if !incidents.is_empty() {
        writeln!(
            io.out,
            "\nopen incidents, the {} oldest of {open} (all: z29c incident list; one: z29c incident show ID):",
            incidents.len()
        )?;
        super::incident::write_list(io, &incidents)?;
    }
    if let Some(next) = next {
        writeln!(
            io.out,
            "\nmore: z29c queue --after '{next}' (with the same filters)"
        )?;
    }
    Ok(())
}

/// The counts as objects keyed by state and by adapter (`""`: a step with no adapter).
fn counts_json(counts: &QueueCounts) -> Value {
    let by_state: Map<String, Value> = counts
        .by_state
        .iter()
        .map(|(state, n)| (print::name_of(state), json!(n)))
        .collect();
    let by_adapter: Map<String, Value> = counts
        .by_adapter
        .iter()
        .map(|(adapter, n)| (adapter.clone(), json!(n)))
        .collect();
    json!({ "by_state": by_state, "by_adapter": by_adapter })
}

fn write_counts(io: &mut Io<'_>, counts: &QueueCounts) -> std::io::Result<()> {
    let total: i64 = counts.by_state.iter().map(|(_, n)| n).sum();
    let by_state: Vec<String> = counts
        .by_state
        .iter()
        .map(|(state, n)| format!("{n} {}", state.label().to_lowercase()))
        .collect();
    let by_adapter: Vec<String> = counts
        .by_adapter
        .iter()
        .map(|(adapter, n)| format!("{} {n}", if adapter.is_empty() { "-" } else { adapter }))
        .collect();
    if total == 0 {
        return writeln!(io.out, "waiting: none");
    }
    writeln!(
        io.out,
        "waiting: {total} ({}); by adapter: {}\n",
        by_state.join(", "),
        by_adapter.join(", ")
    )
}

fn write_rows(io: &mut Io<'_>, rows: &[QueueRow]) -> std::io::Result<()> {
    let now = chrono::Utc::now();
    let mut table = Table::new(&[
        "step",
        "state",
        "adapter",
        "waiting for",
        "attempts",
        "workflow",
        "logical",
        "incident",
    ]);
    for r in rows {
        table.row(vec![
            r.step_id.to_string(),
            print::name_of(&r.state),
            print::or_dash(r.adapter.as_deref()),
            print::age(r.unknown_since, now),
            r.attempts.to_string(),
            r.creation_key.clone(),
            r.logical.clone(),
            if r.open_incident { "open" } else { "-" }.to_owned(),
        ]);
    }
    if table.is_empty() {
        return writeln!(io.out, "No step in the queue matches.");
    }
    table.write(io.out)
}
