//! A page's scripts: the wasm and the chunks of the island it holds, or, on a page that holds
//! none, one line that marks it live once parsed (docs/DESIGN.md §18).

use leptos::prelude::*;

/// The islands, by their components' names in snake case, which the split wasm's manifest uses:
/// the overview's live counts, a bulk run's progress (both named by the server's shell only),
/// and a step's action forms.
#[cfg(feature = "ssr")]
pub const OVERVIEW_ISLAND: &str = "live_overview";
#[cfg(feature = "ssr")]
pub const BULK_RUN_ISLAND: &str = "live_progress";
pub const STEP_FORM_ISLAND: &str = "step_action_form";

/// A page's scripts. With an `island`: Leptos's hydration script (`HydrationScripts
/// islands=true`), under the response's nonce, with links that fetch the split wasm's loader and
/// that island's chunks beside the main wasm; the main module would otherwise ask for them only
/// once it runs, a second round of fetches before the page is live. Without: no wasm, and one
/// line of script that marks the page live once parsed, as the wasm would have.
#[component]
pub fn PageScripts(island: Option<&'static str>) -> impl IntoView {
    let options = expect_context::<LeptosOptions>();
    match island {
        Some(island) => {
            let preloads = island_preloads(&options, island);
            view! { <HydrationScripts options islands=true /> {preloads} }.into_any()
        }
        None => view! { <script nonce=leptos::nonce::use_nonce() inner_html=live_without_wasm()></script> }
            .into_any(),
    }
}

/// The links that preload `island`'s chunks and the split wasm's loader (the server's; a page
/// renders in the browser only inside an island, which holds no scripts).
#[cfg(not(feature = "ssr"))]
fn island_preloads(_options: &LeptosOptions, _island: &str) -> impl IntoView + use<> {}

#[cfg(feature = "ssr")]
fn island_preloads(options: &LeptosOptions, island: &str) -> impl IntoView + use<> {
    static SPLIT: std::sync::OnceLock<crate::assets::Split> = std::sync::OnceLock::new();
    let split = SPLIT.get_or_init(|| crate::assets::Split::of(options));
    let pkg = format!("/{}", options.site_pkg_dir);
    let chunks = split.chunks.get(island).cloned().unwrap_or_default();
    let loader = split.loader.as_ref().map(|loader| {
        view! { <link rel="modulepreload" href=format!("{pkg}/{loader}") crossorigin="anonymous" /> }
    });
    let chunks = chunks
        .into_iter()
        .map(|chunk| {
            view! {
                <link rel="preload" href=format!("{pkg}/{chunk}") r#as="fetch" r#type="application/wasm" crossorigin="anonymous" />
            }
        })
        .collect_view();
    view! { {loader} {chunks} }
}

/// What [`crate::live`] does once the wasm has started on a page without islands, for a page
/// that loads none: the body's `data-hydrated` and the performance mark, once parsed.
fn live_without_wasm() -> String {
    format!(
        "document.addEventListener('DOMContentLoaded', () => {{ \
         document.body.setAttribute('data-hydrated', 'true'); \
         performance.mark('{}'); }});",
        crate::live::HYDRATED_MARK
    )
}
