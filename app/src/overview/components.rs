use leptos::prelude::*;
use leptos_router::components::A;

use engine::domain::StepState;

use super::api::{archive_card, overview_figures};
use super::types::{ArchiveStanding, Outcomes, StateCount};
use crate::error::ConsoleError;

/// Workflow counts by state, then step outcomes per logical step, duplicates detected and
/// the age of unknown outcomes, drawn as SVG on the server; live, they refresh in place.
#[component]
pub fn OverviewPage() -> impl IntoView {
    let figures = Resource::new(|| (), |_| overview_figures());
    let archive = Resource::new(|| (), |_| archive_card());
    view! {
        <section class="page">
            <h1>"Overview"</h1>
            <Suspense fallback=|| view! { <p>"Loading counts…"</p> }>
                {move || Suspend::new(async move {
                    match figures.await {
                        Ok((counts, outcomes)) => view! { <LiveOverview counts outcomes /> }.into_any(),
                        Err(ConsoleError::SignIn { .. }) => {
                            view! {
                                <p>
                                    <A href="/sign-in">"Sign in"</A>
                                    " to see the overview."
                                </p>
                            }
                                .into_any()
                        }
                        Err(error) => view! { <p class="error">{error.to_string()}</p> }.into_any(),
                    }
                })}
            </Suspense>
            <Suspense fallback=|| ()>
                {move || Suspend::new(async move { archive.await.ok().map(|card| view! { <Archive card /> }) })}
            </Suspense>
        </section>
    }
}

/// The archive's card: what left the hot tables, and how old the oldest settled workflow
/// still there is (against the retention, how far the archiver is behind).
#[component]
fn Archive(card: ArchiveStanding) -> impl IntoView {
    let mib = card.bytes as f64 / (1024.0 * 1024.0);
    view! {
        <h2>"Archive"</h2>
        <p data-testid="archive-card">
            {format!(
                "{} workflow(s) and {} audit entr(ies) archived ({mib:.1} MiB); {} passed event(s) dropped. ",
                card.workflows, card.audit_entries, card.events
            )}
            {match card.last_turn {
                Some(at) => format!("Last turn {at}. "),
                None => "No turn yet. ".to_owned(),
            }}
            {match card.oldest_settled_days {
                Some(days) => format!("The oldest settled workflow still in the hot tables settled {days:.1} day(s) ago."),
                None => "No settled workflow is in the hot tables.".to_owned(),
            }}
        </p>
    }
}

/// The figures, and the button that refreshes them: an island. Without JavaScript the button
/// reloads the page (its form asks for it again); live, it asks the server functions again and
/// redraws in place. Each drawing carries the refresh it answers (`data-generation`), so the
/// page and its tests can tell a fresh answer from the server-rendered one.
#[island(lazy)]
pub fn LiveOverview(counts: Vec<StateCount>, outcomes: Outcomes) -> impl IntoView {
    Effect::new(move |_| crate::live::island_ready());
    let refreshes = RwSignal::new(0_u32);
    let figures = RwSignal::new((0_u32, counts, outcomes));
    let failed = RwSignal::new(None::<String>);
    let refresh = move |ev: leptos::ev::MouseEvent| {
        ev.prevent_default();
        let generation = refreshes.get_untracked() + 1;
        refreshes.set(generation);
        leptos::task::spawn_local(async move {
            match overview_figures().await {
                Ok((counts, outcomes)) => {
                    failed.set(None);
                    figures.set((generation, counts, outcomes));
                }
                Err(error) => failed.set(Some(error.to_string())),
            }
        });
    };
    view! {
        {move || {
            let (generation, counts, o) = figures.get();
            view! {
                <CountsTable counts generation />
                <OutcomeCharts o />
            }
        }}
        {move || failed.get().map(|e| view! { <p class="error">{e}</p> })}
        <form method="get" action="/overview" class="actions">
            <button type="submit" on:click=refresh>"Refresh counts"</button>
            " "
            <span class="muted" data-testid="refreshes">
                {move || match refreshes.get() {
                    0 => "Counts as rendered by the server.".to_owned(),
                    1 => "Refreshed once in this page.".to_owned(),
                    n => format!("Refreshed {n} times in this page."),
                }}
            </span>
        </form>
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

/// The colour and legend of each step state in the charts.
const SERIES: [(StepState, &str); 10] = [
    (StepState::Succeeded, "#226b3a"),
    (StepState::Waived, "#7a9a3a"),
    (StepState::OutcomeUnknown, "#c98a00"),
    (StepState::ReviewRequired, "#e0a030"),
    (StepState::Rejected, "#a12a2a"),
    (StepState::Cancelled, "#6b6b6b"),
    (StepState::Running, "#1f5fbf"),
    (StepState::Invoking, "#4a86d8"),
    (StepState::Ready, "#9bb8e0"),
    (StepState::Blocked, "#c7d0dc"),
];

#[component]
fn OutcomeCharts(o: Outcomes) -> impl IntoView {
    let mut steps: Vec<String> = o.by_step.iter().map(|(l, _, _)| l.clone()).collect();
    steps.dedup();
    let (width, bar, gap, label) = (640.0_f64, 22.0_f64, 10.0_f64, 150.0_f64);
    let height = (bar + gap) * steps.len() as f64 + gap;
    let rows = steps
        .iter()
        .enumerate()
        .map(|(i, logical)| {
            let counts: Vec<(StepState, i64)> = o
                .by_step
                .iter()
                .filter(|(l, _, _)| l == logical)
                .map(|(_, s, n)| (*s, *n))
                .collect();
            let total: i64 = counts.iter().map(|(_, n)| n).sum::<i64>().max(1);
            let y = gap + i as f64 * (bar + gap);
            let mut x = label;
            let segments = SERIES
                .iter()
                .filter_map(|(state, colour)| {
                    let n = counts.iter().find(|(s, _)| s == state).map(|(_, n)| *n)?;
                    let w = (width - label) * n as f64 / total as f64;
                    let at = x;
                    x += w;
                    Some(view! {
                        <rect x=at y=y width=w height=bar fill=*colour>
                            <title>{format!("{logical}: {n} {}", state.label().to_lowercase())}</title>
                        </rect>
                    })
                })
                .collect_view();
            view! {
                <text x="0" y=y + bar * 0.7 font-size="13">{format!("{logical} ({})", counts.iter().map(|(_, n)| n).sum::<i64>())}</text>
                {segments}
            }
        })
        .collect_view();
    let legend = SERIES
        .iter()
        .map(|(state, colour)| {
            view! {
                <li><svg class="swatch" viewBox="0 0 1 1" aria-hidden="true"><rect width="1" height="1" fill=*colour></rect></svg>{state.label()}</li>
            }
        })
        .collect_view();
    let age_labels = ["< 1 min", "1–10 min", "10–60 min", "1–24 h", "> 1 day"];
    let most = o.unknown_age.iter().copied().max().unwrap_or(0).max(1);
    let ages = o
        .unknown_age
        .iter()
        .zip(age_labels)
        .enumerate()
        .map(|(i, (n, text))| {
            let h = 90.0 * *n as f64 / most as f64;
            let x = 20.0 + i as f64 * 90.0;
            view! {
                <rect x=x y=112.0 - h width="60" height=h fill="#c98a00"><title>{format!("{n} waiting {text}")}</title></rect>
                <text x=x + 30.0 y="128" font-size="12" text-anchor="middle">{text}</text>
                <text x=x + 30.0 y=108.0 - h font-size="12" text-anchor="middle">{n.to_string()}</text>
            }
        })
        .collect_view();
    view! {
        <h2>"Step outcomes per logical step"</h2>
        <svg role="img" aria-label="Step outcomes per logical step" data-testid="outcomes-chart"
            viewBox=format!("0 0 {width} {height}") width="100%" class="chart wide">
            {rows}
        </svg>
        <ul class="legend">{legend}</ul>
        <p data-testid="duplicates">
            {format!(
                "Duplicate effects detected: {} ({} open, {} resolved).",
                o.duplicates_open + o.duplicates_resolved,
                o.duplicates_open,
                o.duplicates_resolved
            )}
        </p>
        <h2>"How long unknown outcomes have waited"</h2>
        <svg role="img" aria-label="Unknown outcomes by age" data-testid="age-chart" viewBox="0 0 480 135" width="100%" class="chart narrow">
            {ages}
        </svg>
    }
}
