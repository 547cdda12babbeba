use leptos::prelude::*;

use super::api::workflow_counts;
use super::types::StateCount;

/// The landing page until the review queue arrives: workflow counts by state.
#[component]
pub fn OverviewPage() -> impl IntoView {
    let (refreshes, set_refreshes) = signal(0_u32);
    // Each answer carries the refresh it answers, so the page (and its tests) can tell a fresh
    // answer from the server-rendered one.
    let counts = Resource::new(
        move || refreshes.get(),
        |generation| async move { workflow_counts().await.map(|counts| (generation, counts)) },
    );
    view! {
        <section class="page">
            <h1>"Overview"</h1>
            <Suspense fallback=|| view! { <p>"Loading counts…"</p> }>
                {move || Suspend::new(async move {
                    match counts.await {
                        Ok((generation, counts)) => {
                            view! { <CountsTable counts generation /> }.into_any()
                        }
                        Err(error) => view! { <p class="error">{error.to_string()}</p> }.into_any(),
                    }
                })}
            </Suspense>
            <p class="actions">
                <button type="button" on:click=move |_| set_refreshes.update(|n| *n += 1)>
                    "Refresh counts"
                </button>
                <span class="muted" data-testid="refreshes">
                    {move || match refreshes.get() {
                        0 => "Counts as rendered by the server.".to_owned(),
                        1 => "Refreshed once in this page.".to_owned(),
                        n => format!("Refreshed {n} times in this page."),
                    }}
                </span>
            </p>
        </section>
    }
}

#[component]
fn CountsTable(counts: Vec<StateCount>, generation: u32) -> impl IntoView {
    let total: i64 = counts.iter().map(|c| c.count).sum();
    view! {
        <table class="counts" data-generation=generation>
            <caption>"Workflows by state"</caption>
            <thead>
                <tr>
                    <th scope="col">"State"</th>
                    <th scope="col" class="num">"Workflows"</th>
                </tr>
            </thead>
            <tbody>
                {counts
                    .into_iter()
                    .map(|c| {
                        view! {
                            <tr>
                                <td>{c.state.label()}</td>
                                <td class="num">{c.count}</td>
                            </tr>
                        }
                    })
                    .collect_view()}
            </tbody>
            <tfoot>
                <tr>
                    <th scope="row">"All"</th>
                    <td class="num" data-testid="total">{total}</td>
                </tr>
            </tfoot>
        </table>
    }
}
