//! How long something is kept, as files write it: a whole number and `s`, `m`, `h` or `d`
//! (`90s`, `30m`, `24h`, `30d`). An adapter's idempotency retention and a definition's
//! retention of settled workflows are both written so.

use std::time::Duration;

/// `90s`, `30m`, `24h` or `30d`.
pub fn parse(text: &str) -> Result<Duration, String> {
    let refused =
        || format!("`{text}` is not a retention: write a whole number and s, m, h or d (`24h`)");
    let unit = text.chars().last().ok_or_else(refused)?;
    let seconds_per = match unit {
        's' => 1,
        'm' => 60,
        'h' => 3_600,
        'd' => 86_400,
        _ => return Err(refused()),
    };
    let count: u64 = text[..text.len() - 1].parse().map_err(|_| refused())?;
    Ok(Duration::from_secs(
        count.checked_mul(seconds_per).ok_or_else(refused)?,
    ))
}

/// `retention` as files write it, in the largest unit that divides it (`24h`).
pub fn text(retention: Duration) -> String {
    match retention.as_secs() {
        s if s % 86_400 == 0 && s > 0 => format!("{}d", s / 86_400),
        s if s % 3_600 == 0 && s > 0 => format!("{}h", s / 3_600),
        s if s % 60 == 0 && s > 0 => format!("{}m", s / 60),
        s => format!("{s}s"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_retention_reads_back_as_it_was_written() {
        for written in ["90s", "30m", "36h", "30d", "0s"] {
            assert_eq!(text(parse(written).unwrap()), written);
        }
        assert_eq!(parse("48h").unwrap(), Duration::from_secs(2 * 86_400));
    }

    #[test]
    fn a_retention_without_its_unit_or_count_is_refused_in_words() {
        for wrong in ["", "30", "d", "3w", "-1d", "1.5d"] {
            assert!(
                parse(wrong).unwrap_err().contains("whole number"),
                "{wrong}"
            );
        }
    }
}
