//! The names definitions, adapters and tokens are written with (docs/DESIGN.md §16), checked
//! alike at apply, at intake and when a token is made.

/// Whether `name` can name a definition or an adapter: 1 to 63 lowercase letters, digits, `_`
/// or `-`, starting with a letter or digit (the `definition` and `adapter` tables check it too).
pub fn is_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 63
        && name.starts_with(|c: char| c.is_ascii_lowercase() || c.is_ascii_digit())
        && name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_' || c == '-')
}

/// Whether `pattern` can name adapters in a definition's `adapters` list or a token's limit:
/// a name, or a name with one `*` standing for any run of name characters (`letters-*`).
pub fn is_adapter_pattern(pattern: &str) -> bool {
    match pattern.split_once('*') {
        None => is_name(pattern),
        Some((before, after)) => {
            !after.contains('*')
                && pattern.len() <= 63
                && (before.is_empty() || is_name(before))
                && after
                    .chars()
                    .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_' || c == '-')
        }
    }
}

/// Whether a credential limited to the adapters `limit` names (or to none: `None`) may use
/// adapter `name`.
pub fn within(limit: Option<&[String]>, name: &str) -> bool {
    limit.is_none_or(|patterns| patterns.iter().any(|p| adapter_matches(p, name)))
}

/// Whether adapter `name` is one `pattern` names ([`is_adapter_pattern`]).
pub fn adapter_matches(pattern: &str, name: &str) -> bool {
    match pattern.split_once('*') {
        None => pattern == name,
        Some((before, after)) => {
            name.len() >= before.len() + after.len()
                && name.starts_with(before)
                && name.ends_with(after)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pattern_names_adapters_by_one_star() {
        assert!(adapter_matches("letters-*", "letters-eu"));
        assert!(!adapter_matches("letters-*", "letters"));
        assert!(adapter_matches("*-docs", "queryable-docs"));
        assert!(!adapter_matches("payments", "payments-basic"));
        assert!(is_adapter_pattern("pay*ments"));
        assert!(!is_adapter_pattern("a**"));
        assert!(!is_adapter_pattern("Letters-*"));
        assert!(is_adapter_pattern("*"));
    }
}
