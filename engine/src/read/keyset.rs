//! The position a keyset page link carries, `<RFC 3339 time>|<id>`: the last row's sort key,
//! where the next page starts. The console, the API and the command line write and read it
//! alike; each refuses one that does not parse in its own words.

use chrono::{DateTime, Utc};
use uuid::Uuid;

/// The last row's time and id.
pub type Position = (DateTime<Utc>, Uuid);

/// `position` as a page link carries it.
pub fn format((at, id): Position) -> String {
    format!("{}|{id}", at.to_rfc3339())
}

/// The position `text` names, or `None` when it is not one.
pub fn parse(text: &str) -> Option<Position> {
    let (at, id) = text.split_once('|')?;
    let at = DateTime::parse_from_rfc3339(at).ok()?.with_timezone(&Utc);
    Some((at, Uuid::parse_str(id).ok()?))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_position_reads_back_as_it_was_written_and_anything_else_is_none() {
        let position = (Utc::now(), Uuid::now_v7());
        assert_eq!(parse(&format(position)), Some(position));
        for text in [
            "",
            "yesterday",
            "2026-12-07T10:00:00Z",
            "2026-12-07T10:00:00Z|x",
            "|",
        ] {
            assert_eq!(parse(text), None, "{text}");
        }
    }
}
