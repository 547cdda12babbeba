//! The position a keyset page link carries, `<RFC 3339 time>|<id>`: the last row's sort key,
//! where the next page starts. The console, the API and the command line write and read it
//! alike; each refuses one that does not parse in its own words. Every paged list, by position
//! or by id, reads one row more than a page and cuts it here.

use chrono::{DateTime, Utc};
use uuid::Uuid;

/// The last row's time and id.
pub type Position = (DateTime<Utc>, Uuid);

/// `position` as a page link carries it.
pub fn format((at, id): Position) -> String {
    format!("{}|{id}", at.to_rfc3339())
}

/// Cuts `rows`, read with one row more than `limit` asks for, to `limit`; when that extra row
/// was there, answers where the next page starts: the key (`key`) of this page's last row, a
/// [`Position`] or an id.
pub fn cut<T, K>(rows: &mut Vec<T>, limit: i64, key: impl Fn(&T) -> K) -> Option<K> {
    let limit = usize::try_from(limit).unwrap_or(0);
    if rows.len() <= limit {
        return None;
    }
    rows.truncate(limit);
    rows.last().map(key)
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

    #[test]
    fn a_page_read_with_one_row_more_is_cut_and_names_its_last_row_as_where_the_next_starts() {
        let at = |n: i64| (DateTime::from_timestamp(n, 0).unwrap(), Uuid::nil());
        let mut rows = vec![1, 2, 3];
        assert_eq!(cut(&mut rows, 2, |n| at(*n)), Some(at(2)));
        assert_eq!(rows, [1, 2]);
        assert_eq!(cut(&mut rows, 2, |n| at(*n)), None);
        assert_eq!(rows, [1, 2]);
    }
}
