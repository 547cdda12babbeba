//! What the deployment lets adapter files reach (docs/DESIGN.md §15), from flags and the
//! environment: the hosts requests may go to, the directory secret files must be in, and the
//! prefix of the variables a file may name. Set once, before any command runs.

use std::collections::BTreeSet;
use std::path::Path;

use anyhow::Context;
use engine::adapter::policy::{Allowed, Egress, Policy};

use crate::cli::Command;

/// The loopback networks the demo and the harness call their own destinations on.
pub const LOOPBACK: [&str; 2] = ["127.0.0.0/8", "::1"];

impl crate::cli::PolicyArgs {
    /// The policy `command` runs under: what the flags say, with loopback and a secrets
    /// directory added for the demo and the harness, which call destinations of their own.
    pub(crate) fn for_command(&self, command: &Command) -> anyhow::Result<Policy> {
        let mut allowed: Vec<String> = self.egress_allow.clone();
        let mut secrets_dir = self.secrets_dir.clone();
        let own_destinations = match command {
            Command::Serve(args) if args.demo => Some(args.demo_data_dir.clone()),
            #[cfg(feature = "lab")]
            Command::Scenario(_) | Command::Bench(_) => Some(std::env::temp_dir()),
            _ => None,
        };
        if let Some(dir) = own_destinations {
            allowed.extend(LOOPBACK.map(str::to_owned));
            if secrets_dir.is_none() {
                std::fs::create_dir_all(&dir)
                    .with_context(|| format!("creating {}", dir.display()))?;
                secrets_dir = Some(dir);
            }
        }
        self.policy(&allowed, secrets_dir.as_deref())
    }

    fn policy(&self, allowed: &[String], secrets_dir: Option<&Path>) -> anyhow::Result<Policy> {
        let entries = allowed
            .iter()
            .filter(|entry| !entry.trim().is_empty())
            .map(|entry| Allowed::parse(entry).map_err(anyhow::Error::msg))
            .collect::<anyhow::Result<Vec<_>>>()
            .context("--egress-allow (Z29C_EGRESS_ALLOW)")?;
        let secrets_dir = secrets_dir
            .map(|dir| {
                std::fs::canonicalize(dir).with_context(|| {
                    format!(
                        "--secrets-dir (Z29C_SECRETS_DIR): {} is not a directory here",
                        dir.display()
                    )
                })
            })
            .transpose()?;
        Ok(Policy {
            env_prefix: self.secret_env_prefix.clone(),
            own_env: own_variables(),
            secrets_dir,
            egress: Egress::Only(entries),
        })
    }
}

/// Every environment variable `z29c` reads a setting from, in any command.
fn own_variables() -> Vec<String> {
    fn walk(command: &clap::Command, found: &mut BTreeSet<String>) {
        for arg in command.get_arguments() {
            if let Some(env) = arg.get_env() {
                found.insert(env.to_string_lossy().into_owned());
            }
        }
        for sub in command.get_subcommands() {
            walk(sub, found);
        }
    }
    let mut found = BTreeSet::new();
    walk(
        &<crate::cli::Cli as clap::CommandFactory>::command(),
        &mut found,
    );
    found.into_iter().collect()
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use crate::cli::Cli;

    fn policy_of(argv: &[&str]) -> engine::adapter::policy::Policy {
        let cli = Cli::try_parse_from(argv).unwrap();
        cli.policy.for_command(&cli.command).unwrap()
    }

    #[test]
    fn by_default_no_host_is_reached_no_file_named_and_only_z29c_variables_but_its_own() {
        // Only the flags are read here (each names its value), not this machine's environment.
        let policy = policy_of(&["z29c", "--secret-env-prefix", "Z29C_", "migrate"]);
        assert!(policy.may_reach("api.stripe.com").is_err());
        assert!(policy.may_reach("127.0.0.1").is_err());
        assert!(
            policy
                .allows_file(std::path::Path::new("/tmp/key"))
                .is_err()
        );
        assert!(policy.allows_env("Z29C_PAYMENTS_API_KEY").is_ok());
        assert!(policy.allows_env("DATABASE_URL").is_err());
        for own in [
            "Z29C_WEBHOOK",
            "Z29C_WEBHOOK_SIGNING_SECRET",
            "Z29C_PG_DATA",
        ] {
            assert!(policy.allows_env(own).is_err(), "{own}");
        }
    }

    #[test]
    fn the_allowlist_names_hosts_and_networks_and_the_demo_adds_loopback() {
        let policy = policy_of(&[
            "z29c",
            "--egress-allow",
            "api.stripe.com,10.0.0.0/8",
            "migrate",
        ]);
        assert!(policy.may_reach("api.stripe.com").is_ok());
        assert!(policy.allows(None, "10.1.2.3".parse().unwrap()));
        assert!(!policy.allows(None, "127.0.0.1".parse().unwrap()));
        let data = tempfile::tempdir().unwrap();
        let demo = policy_of(&[
            "z29c",
            "serve",
            "--demo",
            "--demo-data-dir",
            data.path().to_str().unwrap(),
        ]);
        assert!(demo.allows(None, "127.0.0.1".parse().unwrap()));
        assert!(
            demo.allows_file(&data.path().canonicalize().unwrap().join("payments-api-key"))
                .is_ok()
        );
        assert!(!demo.allows(None, "169.254.169.254".parse().unwrap()));
    }

    #[test]
    fn an_allowlist_entry_that_is_nothing_stops_the_start_with_a_sentence() {
        let cli =
            Cli::try_parse_from(["z29c", "--egress-allow", "not a host!", "migrate"]).unwrap();
        let refused = cli.policy.for_command(&cli.command).unwrap_err();
        assert!(
            format!("{refused:#}").contains("Z29C_EGRESS_ALLOW"),
            "{refused:#}"
        );
    }
}
