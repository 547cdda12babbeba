//! When a page is live. The loader hydrates the page's islands one by one; each announces itself
//! with [`island_ready`] once it runs. When the last has, the body gets `data-hydrated="true"`
//! (tests wait for it) and the browser's performance timeline gets the mark [`HYDRATED_MARK`]
//! (`z29c bench console` reads it as the time until the page is interactive). A page without
//! islands is live as soon as the wasm has started.

/// The performance mark set once every island of the page is live.
pub const HYDRATED_MARK: &str = "z29c-hydrated";

#[cfg(feature = "hydrate")]
thread_local! {
    /// The islands on the page, counted before any hydrates.
    static EXPECTED: std::cell::Cell<Option<u32>> = const { std::cell::Cell::new(None) };
    /// The islands live so far.
    static LIVE: std::cell::Cell<u32> = const { std::cell::Cell::new(0) };
    static MARKED: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Counts the page's islands; called once, before the loader hydrates them.
#[cfg(feature = "hydrate")]
pub fn expect_islands() {
    let islands = web_sys::window()
        .and_then(|w| w.document())
        .and_then(|d| d.query_selector_all("leptos-island").ok())
        .map_or(0, |found| found.length());
    EXPECTED.set(Some(islands));
    settle();
}

/// Says that one island is live. Islands call it from an effect, which runs only in the browser.
pub fn island_ready() {
    #[cfg(feature = "hydrate")]
    {
        LIVE.set(LIVE.get() + 1);
        settle();
    }
}

/// Marks the page live once every island has said so.
#[cfg(feature = "hydrate")]
fn settle() {
    let all_live = EXPECTED
        .get()
        .is_some_and(|expected| LIVE.get() >= expected);
    if !all_live || MARKED.replace(true) {
        return;
    }
    let Some(window) = web_sys::window() else {
        return;
    };
    if let Some(body) = window.document().and_then(|d| d.body()) {
        let _ = body.set_attribute("data-hydrated", "true");
    }
    if let Some(performance) = window.performance() {
        let _ = performance.mark(HYDRATED_MARK);
    }
}
