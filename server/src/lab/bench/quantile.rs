//! Quantiles of measured times, shared by the console bench's tables.

/// The `p` quantile of `sorted` by nearest rank; 0 when there is nothing to rank.
pub(super) fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let rank = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[rank.min(sorted.len() - 1)]
}

#[cfg(test)]
mod tests {
    use super::percentile;

    #[test]
    fn a_quantile_is_the_nearest_ranked_measurement_and_nothing_ranks_as_zero() {
        let sorted = [1.0, 2.0, 3.0, 4.0, 50.0];
        assert_eq!(percentile(&sorted, 0.5), 3.0);
        assert_eq!(percentile(&sorted, 0.99), 50.0);
        assert_eq!(percentile(&sorted, 0.0), 1.0);
        assert_eq!(percentile(&[], 0.5), 0.0);
    }
}
