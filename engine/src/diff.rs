//! The difference between two versions of a file, as people review a configuration change
//! (docs/DESIGN.md §15): a unified diff, bounded in time and in size whatever the files, and
//! computed off the async threads.

use std::time::{Duration, Instant};

/// How long a diff may search for the smallest difference before it settles for a larger one.
const DEADLINE: Duration = Duration::from_millis(500);

/// The most of a diff that is kept; the rest is cut with a note.
pub const MAX_DIFF_BYTES: usize = 64 * 1024;

/// The unified diff of `before` to `after` (empty when they are the same), labelled with
/// `from` and `to`, cut at [`MAX_DIFF_BYTES`]. Blocking: see [`unified_off_thread`].
pub fn unified(before: &str, after: &str, from: &str, to: &str) -> String {
    let diff = similar::TextDiff::configure()
        .deadline(Instant::now() + DEADLINE)
        .diff_lines(before, after);
    let mut text = diff
        .unified_diff()
        .context_radius(2)
        .header(from, to)
        .to_string();
    if text.len() > MAX_DIFF_BYTES {
        let mut cut = MAX_DIFF_BYTES;
        while !text.is_char_boundary(cut) {
            cut -= 1;
        }
        text.truncate(cut);
        text.push_str("\n… (the diff is longer; compare the two versions in full)\n");
    }
    text
}

/// [`unified`] on a blocking thread, so a large file never holds up an async one.
pub async fn unified_off_thread(before: String, after: String, from: String, to: String) -> String {
    tokio::task::spawn_blocking(move || unified(&before, &after, &from, &to))
        .await
        .unwrap_or_else(|_| "(the diff could not be computed)".to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_diff_names_the_changed_line() {
        let diff = unified("a: 1\nb: 2\n", "a: 1\nb: 3\n", "v1", "v2");
        assert!(diff.contains("-b: 2") && diff.contains("+b: 3"), "{diff}");
        assert!(unified("same\n", "same\n", "v1", "v2").is_empty());
    }

    #[test]
    fn a_diff_of_two_large_unrelated_files_is_cut_with_a_note() {
        let before: String = (0..40_000).map(|i| format!("line {i}\n")).collect();
        let after: String = (0..40_000).map(|i| format!("other {}\n", i * 7)).collect();
        let diff = unified(&before, &after, "v1", "v2");
        assert!(diff.len() <= MAX_DIFF_BYTES + 100, "{}", diff.len());
        assert!(
            diff.ends_with("compare the two versions in full)\n"),
            "{diff}"
        );
    }
}
