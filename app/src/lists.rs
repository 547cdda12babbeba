//! What the console's lists share: the keyset cursor a page link carries, and an age a person
//! reads at a glance.

#[cfg(feature = "ssr")]
use crate::error::ConsoleError;

/// The keyset cursor a page link carries (`<time>|<id>`); none when blank, and refused when it
/// does not parse.
#[cfg(feature = "ssr")]
pub fn keyset_cursor(
    after: Option<&str>,
) -> Result<Option<engine::read::keyset::Position>, ConsoleError> {
    Ok(match after.filter(|a| !a.is_empty()) {
        None => None,
        Some(text) => Some(engine::read::keyset::parse(text).ok_or_else(|| {
            ConsoleError::Conflict {
                reason: "That page link is not valid; start from the first page.".into(),
            }
            .answered()
        })?),
    })
}

/// "42 s", "7 min", "3 h", "2 d": an age a person reads at a glance.
pub fn age(secs: i64) -> String {
    match secs {
        s if s < 60 => format!("{s} s"),
        s if s < 3_600 => format!("{} min", s / 60),
        s if s < 86_400 => format!("{} h", s / 3_600),
        s => format!("{} d", s / 86_400),
    }
}
