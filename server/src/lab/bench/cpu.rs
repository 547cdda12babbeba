//! Where a bench's CPU time went, by who spent it: PostgreSQL (its postmaster and every
//! backend, whether still running or exited), the worker processes (this process's children,
//! counted once they have exited and been waited for), and this process (the publisher, its
//! consumers and the bench's own polls). Read from `/proc` before and after a run; Linux only,
//! and PostgreSQL's share only for the private cluster the bench started.

use std::path::Path;

/// The kernel reports times in `/proc` in clock ticks of 1/100 s (`USER_HZ`, fixed at 100 for
/// every architecture's user-visible interface).
const TICKS_PER_SEC: f64 = 100.0;

/// Cumulative CPU seconds at one moment.
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct CpuSnapshot {
    /// The cluster's processes: the postmaster's own and exited children's time, and each live
    /// child's. `None` without a private cluster (or without `/proc`).
    pub postgres: Option<f64>,
    /// This process's exited and waited-for children: the worker processes.
    pub children: f64,
    /// This process itself.
    pub own: f64,
}

impl CpuSnapshot {
    /// Reads the times now; `data_dir` is the private cluster's, if the bench started one.
    pub(super) fn take(data_dir: Option<&Path>) -> Self {
        let own = times("self").unwrap_or_default();
        Self {
            postgres: data_dir.and_then(postgres_seconds),
            children: seconds(own.waited_children),
            own: seconds(own.own),
        }
    }

    /// What was spent between `self` and `later`.
    pub(super) fn until(self, later: Self) -> Self {
        Self {
            postgres: self
                .postgres
                .zip(later.postgres)
                .map(|(before, after)| after - before),
            children: later.children - self.children,
            own: later.own - self.own,
        }
    }
}

/// A process's ticks: its own (user + system) and its waited-for children's.
#[derive(Debug, Clone, Copy, Default)]
struct Times {
    own: u64,
    waited_children: u64,
    parent: i32,
}

fn seconds(ticks: u64) -> f64 {
    ticks as f64 / TICKS_PER_SEC
}

/// Reads `/proc/<pid>/stat`.
fn times(pid: &str) -> Option<Times> {
    parse_stat(&std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?)
}

/// The fields after the command name (which may hold spaces and parentheses, so it ends at the
/// last `)`) are, from the third on, state, ppid, ..., with utime, stime, cutime and cstime
/// the 14th to 17th.
fn parse_stat(stat: &str) -> Option<Times> {
    let fields: Vec<&str> = stat
        .get(stat.rfind(')')? + 1..)?
        .split_whitespace()
        .collect();
    let field = |n: usize| fields.get(n - 3).and_then(|f| f.parse::<i64>().ok());
    let ticks = |n: usize| u64::try_from(field(n).unwrap_or(0)).unwrap_or(0);
    Some(Times {
        own: ticks(14) + ticks(15),
        waited_children: ticks(16) + ticks(17),
        parent: i32::try_from(field(4)?).ok()?,
    })
}

/// The cluster's CPU seconds: the postmaster (named on the first line of `postmaster.pid`),
/// with the backends it has reaped, plus every live child of it.
fn postgres_seconds(data_dir: &Path) -> Option<f64> {
    let pid_file = std::fs::read_to_string(data_dir.join("postmaster.pid")).ok()?;
    let postmaster: i32 = pid_file.lines().next()?.trim().parse().ok()?;
    let main = times(&postmaster.to_string())?;
    let live: u64 = std::fs::read_dir("/proc")
        .ok()?
        .filter_map(Result::ok)
        .filter_map(|entry| entry.file_name().to_str()?.parse::<i32>().ok())
        .filter_map(|pid| times(&pid.to_string()))
        .filter(|t| t.parent == postmaster)
        .map(|t| t.own)
        .sum();
    Some(seconds(main.own + main.waited_children + live))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stat_line_is_read_past_a_command_name_with_spaces_and_parentheses() {
        let t = parse_stat(
            "4242 (post (gres) x) S 17 4242 4242 0 -1 4194560 1 0 0 0 250 50 7 3 20 0 1 0 1 1 1",
        )
        .unwrap();
        assert_eq!((t.parent, t.own, t.waited_children), (17, 300, 10));
    }

    #[test]
    fn a_truncated_stat_line_is_refused() {
        assert!(parse_stat("4242 (postgres) S").is_none());
    }
}
