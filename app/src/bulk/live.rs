//! A bulk run's progress, live: an island that asks for the run again every second until it
//! finishes. Server-rendered, it is the progress at the moment of the request.

use leptos::prelude::*;

use leptos::server_fn::ServerFn;

use super::types::RunView;

/// The run `id`'s progress, starting from `run` as the server read it.
#[island(lazy)]
pub fn LiveProgress(id: String, run: RunView) -> impl IntoView {
    let run = RwSignal::new(run);
    Effect::new(move |_| crate::live::island_ready());
    let shown = id.clone();
    #[cfg(feature = "hydrate")]
    follow(id, run);
    #[cfg(not(feature = "hydrate"))]
    let _ = id;
    move || view! { <Progress id=shown.clone() r=run.get() /> }
}

/// Reads run `id` every second into `run`, until it has finished.
#[cfg(feature = "hydrate")]
fn follow(id: String, run: RwSignal<RunView>) {
    if run.with_untracked(|r| r.finished) {
        return;
    }
    let interval = StoredValue::new(None::<IntervalHandle>);
    let tick = move || {
        if run.with_untracked(|r| r.finished) {
            if let Some(handle) = interval.get_value() {
                handle.clear();
            }
            return;
        }
        let id = id.clone();
        leptos::task::spawn_local(async move {
            if let Ok(next) = super::api::bulk_run(id).await {
                run.set(next);
            }
        });
    };
    if let Ok(handle) = set_interval_with_handle(tick, std::time::Duration::from_secs(1)) {
        interval.set_value(Some(handle));
    }
}

/// The run: who started it, why, and each row's outcome so far. (Plain links: an island has
/// no router in the browser.)
#[component]
fn Progress(id: String, r: RunView) -> impl IntoView {
    let count = |o: &str| {
        r.items
            .iter()
            .filter(|(_, _, outcome, _)| outcome == o)
            .count()
    };
    let summary = format!(
        "{} of {} done, {} refused, {} failed, {} pending{}",
        count("done"),
        r.items.len(),
        count("refused"),
        count("failed"),
        count("pending"),
        if r.finished { " — finished" } else { "" }
    );
    view! {
        <h1>{format!("Bulk run: {}", r.action)}</h1>
        <p class="muted">{format!("By {} at {} steps/s: {}", r.author, r.rate_per_sec, r.reason)}</p>
        <p data-testid="bulk-progress">{summary}</p>
        {r.stopped.map(|s| view! { <p class="notice warn" data-testid="bulk-stopped">{s}</p> })}
        {(!r.finished).then(|| view! { <p><a href="">"Reload"</a></p> })}
        {r.stop_csrf.map(|csrf| view! {
            <form method="post" action=super::api::StopBulk::url() class="stack action danger" data-testid="bulk-stop">
                <input type="hidden" name="csrf" value=csrf />
                <input type="hidden" name="id" value=id.clone() />
                <label>"Why stop it (recorded in the audit log)"
                    <textarea name="reason" required rows="2"></textarea>
                </label>
                <button type="submit" class="danger">"Stop this run"</button>
            </form>
        })}
        <table class="queue">
            <tbody>
                {r.items
                    .into_iter()
                    .map(|(step, key, outcome, message)| view! {
                        <tr>
                            <td><a href=format!("/steps/{step}")>{key}</a></td>
                            <td>{outcome}</td>
                            <td class="small">{message}</td>
                        </tr>
                    })
                    .collect_view()}
            </tbody>
        </table>
    }
}
