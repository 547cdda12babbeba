//! How every command prints data: aligned tables and `label: value` lines for people, JSON for
//! programs (one document for one thing, one object per line for a list).

use std::io::{self, Write};

use chrono::{DateTime, Utc};
use serde::Serialize;

/// Columns aligned to their widest cell, under a header row.
pub struct Table {
    headers: Vec<&'static str>,
    rows: Vec<Vec<String>>,
}

impl Table {
    /// A table with these column headers and no rows.
    pub fn new(headers: &[&'static str]) -> Self {
        Table {
            headers: headers.to_vec(),
            rows: Vec::new(),
        }
    }

    /// Appends a row; a missing cell prints empty.
    pub fn row(&mut self, cells: Vec<String>) {
        self.rows.push(cells);
    }

    /// Whether no row was appended.
    pub fn is_empty(&self) -> bool {
        self.rows.is_empty()
    }

    /// Writes the header and every row, columns two spaces apart, no trailing blanks.
    pub fn write(&self, out: &mut dyn Write) -> io::Result<()> {
        let mut widths: Vec<usize> = self.headers.iter().map(|h| h.chars().count()).collect();
        for row in &self.rows {
            for (i, cell) in row.iter().enumerate() {
                let width = cell.chars().count();
                match widths.get_mut(i) {
                    Some(w) => *w = (*w).max(width),
                    None => widths.push(width),
                }
            }
        }
        let header: Vec<String> = self.headers.iter().map(|h| (*h).to_owned()).collect();
        for row in std::iter::once(&header).chain(&self.rows) {
            let mut line = String::new();
            for (i, width) in widths.iter().enumerate() {
                let cell = row.get(i).map_or("", String::as_str);
                if i > 0 {
                    line.push_str("  ");
                }
                line.push_str(cell);
                line.extend(std::iter::repeat_n(
                    ' ',
                    width.saturating_sub(cell.chars().count()),
                ));
            }
            writeln!(out, "{}", line.trim_end())?;
        }
        Ok(())
    }
}

/// `label: value` lines, the values aligned.
pub fn fields(out: &mut dyn Write, pairs: &[(&str, String)]) -> io::Result<()> {
    let width = pairs
        .iter()
        .map(|(l, _)| l.chars().count())
        .max()
        .unwrap_or(0);
    for (label, value) in pairs {
        let pad = width - label.chars().count();
        writeln!(out, "{label}:{} {value}", " ".repeat(pad))?;
    }
    Ok(())
}

/// One JSON document on one line.
pub fn json(out: &mut dyn Write, value: &impl Serialize) -> io::Result<()> {
    serde_json::to_writer(&mut *out, value)?;
    writeln!(out)
}

/// One JSON object per line, one line per item.
pub fn json_lines<T: Serialize>(
    out: &mut dyn Write,
    items: impl IntoIterator<Item = T>,
) -> io::Result<()> {
    for item in items {
        json(out, &item)?;
    }
    Ok(())
}

/// A moment, to the second, in UTC.
pub fn time(t: DateTime<Utc>) -> String {
    t.format("%Y-%m-%d %H:%M:%S UTC").to_string()
}

/// A moment that may not have happened: `-` when it has not.
pub fn maybe_time(t: Option<DateTime<Utc>>) -> String {
    t.map_or_else(|| "-".to_owned(), time)
}

/// How long ago `since` was, before `now`, in its two largest units (`3d 4h`, `12m 5s`).
pub fn age(since: DateTime<Utc>, now: DateTime<Utc>) -> String {
    let secs = (now - since).num_seconds().max(0);
    let (d, h, m, s) = (secs / 86_400, secs / 3_600 % 24, secs / 60 % 60, secs % 60);
    match (d, h, m) {
        (0, 0, 0) => format!("{s}s"),
        (0, 0, _) => format!("{m}m {s}s"),
        (0, _, _) => format!("{h}h {m}m"),
        _ => format!("{d}d {h}h"),
    }
}

/// The name a value serializes to (the snake_case name of a state or a role).
pub fn name_of(value: &impl Serialize) -> String {
    match serde_json::to_value(value) {
        Ok(serde_json::Value::String(name)) => name,
        Ok(other) => other.to_string(),
        Err(_) => String::new(),
    }
}

/// `value`, or `-` when there is none.
pub fn or_dash(value: Option<&str>) -> String {
    value.unwrap_or("-").to_owned()
}

/// The keyset cursor `next` printed: the last row's time and id.
pub(crate) fn cursor(text: &str) -> Result<engine::read::keyset::Position, super::Stop> {
    engine::read::keyset::parse(text).ok_or_else(|| {
        super::Stop::Usage(format!(
            "`{text}` is not a page cursor: pass the one a previous page printed."
        ))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_table_aligns_each_column_to_its_widest_cell() {
        let mut table = Table::new(&["name", "role"]);
        table.row(vec!["alexandra".into(), "approver".into()]);
        table.row(vec!["bo".into(), "viewer".into()]);
        let mut out = Vec::new();
        table.write(&mut out).unwrap();
        assert_eq!(
            String::from_utf8(out).unwrap(),
            "name       role\nalexandra  approver\nbo         viewer\n"
        );
    }

    #[test]
    fn an_age_names_its_two_largest_units() {
        let now = Utc::now();
        assert_eq!(age(now - chrono::Duration::seconds(42), now), "42s");
        assert_eq!(age(now - chrono::Duration::seconds(3_725), now), "1h 2m");
        assert_eq!(age(now - chrono::Duration::seconds(90_061), now), "1d 1h");
    }
}
