//! What the deployment lets adapter files reach (docs/DESIGN.md §15): the environment
//! variables and the files a secret (or a base URL) may name, and the hosts a request may go
//! to. A file says what it needs; the deployment decides what it may have.
//!
//! The process sets its policy once at start ([`set`]); until then the library's default
//! applies: any variable, no secret file, every public address (link-local and cloud-metadata
//! addresses are refused unless named explicitly, always). The `z29c` binary always sets one,
//! from its flags, and its default allows no host at all.

use std::net::IpAddr;
use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};

use ipnet::IpNet;

/// The most a secret file may hold: a key or a password, never a document.
pub const MAX_SECRET_FILE_BYTES: u64 = 64 * 1024;

/// The deployment's rules for adapter files.
#[derive(Debug, Clone)]
pub struct Policy {
    /// A `{ env: NAME }` reference must name a variable beginning with this.
    pub env_prefix: String,
    /// Variables no file may name even with the prefix: the process's own settings (the
    /// alert webhook's URL, say, carries its secret).
    pub own_env: Vec<String>,
    /// A `{ file: PATH }` reference must name a regular file inside this directory; without
    /// one, no secret file may be named.
    pub secrets_dir: Option<PathBuf>,
    /// Where requests may go.
    pub egress: Egress,
}

/// Where outbound requests may go.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Egress {
    /// Every public address (the library's default, for tests and embedding programs).
    Public,
    /// Only these hosts and networks.
    Only(Vec<Allowed>),
}

/// One entry of the egress allowlist.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Allowed {
    /// A host name, exactly (`api.stripe.com`), or every name below a domain (`*.stripe.com`).
    Host(String),
    /// An address or a network (`127.0.0.1`, `10.0.0.0/8`, `::1`).
    Net(IpNet),
}

impl std::fmt::Display for Allowed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Allowed::Host(host) => f.write_str(host),
            Allowed::Net(net) if net.prefix_len() == net.max_prefix_len() => {
                write!(f, "{}", net.addr())
            }
            Allowed::Net(net) => write!(f, "{net}"),
        }
    }
}

impl Allowed {
    /// Parses one entry: a network in CIDR notation, an address, or a host name.
    pub fn parse(text: &str) -> Result<Allowed, String> {
        let text = text.trim();
        if text.is_empty() {
            return Err("an empty egress entry".to_owned());
        }
        if let Ok(net) = text.parse::<IpNet>() {
            return Ok(Allowed::Net(net));
        }
        if let Ok(ip) = text.parse::<IpAddr>() {
            return Ok(Allowed::Net(IpNet::from(ip)));
        }
        let name = text.to_ascii_lowercase();
        let valid = name.trim_start_matches("*.").split('.').all(|label| {
            !label.is_empty() && label.chars().all(|c| c.is_ascii_alphanumeric() || c == '-')
        });
        if valid {
            Ok(Allowed::Host(name))
        } else {
            Err(format!(
                "`{text}` is neither a host name, an address nor a network"
            ))
        }
    }
}

impl Default for Policy {
    fn default() -> Self {
        Policy {
            env_prefix: String::new(),
            own_env: Vec::new(),
            secrets_dir: None,
            egress: Egress::Public,
        }
    }
}

static POLICY: OnceLock<Arc<Policy>> = OnceLock::new();

/// Sets this process's policy; only the first call counts (returns false for the others).
pub fn set(policy: Policy) -> bool {
    POLICY.set(Arc::new(policy)).is_ok()
}

/// This process's policy.
pub fn current() -> Arc<Policy> {
    POLICY
        .get()
        .cloned()
        .unwrap_or_else(|| Arc::new(Policy::default()))
}

/// Whether `ip` is an address no allowlist reaches unless it names it: link-local (where cloud
/// metadata services answer, 169.254.169.254 and fd00:ec2::254 among them), unspecified or
/// multicast.
fn reserved(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => {
            v4.is_link_local() || v4.is_unspecified() || v4.is_multicast() || v4.is_broadcast()
        }
        IpAddr::V6(v6) => {
            (v6.segments()[0] & 0xffc0) == 0xfe80
                || v6.is_unspecified()
                || v6.is_multicast()
                || v6.segments()[..4] == [0xfd00, 0x0ec2, 0, 0]
                || v6
                    .to_ipv4_mapped()
                    .is_some_and(|v4| reserved(IpAddr::V4(v4)))
        }
    }
}

impl Policy {
    /// Whether a request may go to address `ip`, reached through the host name `name` (none
    /// for an address written in the URL).
    pub fn allows(&self, name: Option<&str>, ip: IpAddr) -> bool {
        let named_net = |entries: &[Allowed]| {
            entries
                .iter()
                .any(|e| matches!(e, Allowed::Net(net) if net.contains(&ip) && (net.prefix_len() == net.max_prefix_len() || !reserved(ip))))
        };
        match &self.egress {
            Egress::Public => !reserved(ip),
            Egress::Only(entries) => {
                let by_name = name.is_some_and(|name| self.allows_name(name)) && !reserved(ip);
                by_name || named_net(entries)
            }
        }
    }

    /// Whether host name `name` is on the allowlist by name.
    pub fn allows_name(&self, name: &str) -> bool {
        let name = name.trim_end_matches('.').to_ascii_lowercase();
        match &self.egress {
            Egress::Public => true,
            Egress::Only(entries) => entries.iter().any(|e| match e {
                Allowed::Host(host) => match host.strip_prefix("*.") {
                    Some(domain) => name.ends_with(&format!(".{domain}")),
                    None => *host == name,
                },
                Allowed::Net(_) => false,
            }),
        }
    }

    /// Whether a host written in a base URL could be reached at all: an address must be
    /// allowed; a name must be listed by name, unless networks are listed (then only its
    /// addresses, at connect time, can tell).
    pub fn may_reach(&self, host: &str) -> Result<(), String> {
        let bare = host.trim_start_matches('[').trim_end_matches(']');
        if let Ok(ip) = bare.parse::<IpAddr>() {
            return if self.allows(None, ip) {
                Ok(())
            } else {
                Err(format!(
                    "the deployment's egress policy does not allow {ip}"
                ))
            };
        }
        let networks = matches!(&self.egress, Egress::Only(entries) if entries.iter().any(|e| matches!(e, Allowed::Net(_))));
        if self.allows_name(bare) || networks {
            Ok(())
        } else {
            Err(format!(
                "the deployment's egress policy does not allow `{bare}` (z29c --egress-allow, Z29C_EGRESS_ALLOW)"
            ))
        }
    }

    /// Whether a secret (or base URL) may name environment variable `name`.
    pub fn allows_env(&self, name: &str) -> Result<(), String> {
        if self.own_env.iter().any(|own| own == name) {
            Err(format!(
                "`{name}` is one of Z29C's own settings, which no adapter file may name"
            ))
        } else if name.starts_with(&self.env_prefix) {
            Ok(())
        } else {
            Err(format!(
                "`{name}` is not an environment variable adapter files may name: they must begin with `{}` (z29c --secret-env-prefix)",
                self.env_prefix
            ))
        }
    }

    /// Whether a secret may name file `path`: inside the secrets directory (after resolving
    /// `..` and links, when it exists), and no other.
    pub fn allows_file(&self, path: &Path) -> Result<(), String> {
        let Some(dir) = &self.secrets_dir else {
            return Err("no secrets directory is configured, so a secret may not name a file (z29c --secrets-dir)".to_owned());
        };
        let dir = std::fs::canonicalize(dir).unwrap_or_else(|_| dir.clone());
        let lexical_inside = path.is_absolute()
            && !path
                .components()
                .any(|c| matches!(c, std::path::Component::ParentDir))
            && path.starts_with(&dir);
        let resolved_inside = match std::fs::canonicalize(path) {
            Ok(real) => real.starts_with(&dir),
            Err(_) => lexical_inside,
        };
        if lexical_inside && resolved_inside {
            Ok(())
        } else {
            Err(format!(
                "`{}` is not inside the secrets directory `{}`",
                path.display(),
                dir.display()
            ))
        }
    }
}

/// A DNS resolver that answers only with the addresses the process's policy allows: the check
/// is made on the address the connection will use, so no name can be pointed elsewhere
/// between a check and the connect.
pub(crate) struct Resolver;

impl reqwest::dns::Resolve for Resolver {
    fn resolve(&self, name: reqwest::dns::Name) -> reqwest::dns::Resolving {
        let host = name.as_str().to_owned();
        Box::pin(async move {
            let policy = current();
            let found = tokio::net::lookup_host((host.as_str(), 0)).await?;
            let allowed: Vec<std::net::SocketAddr> = found
                .filter(|addr| policy.allows(Some(&host), addr.ip()))
                .collect();
            if allowed.is_empty() {
                let refused: Box<dyn std::error::Error + Send + Sync> =
                    format!("the deployment's egress policy allows no address of `{host}`").into();
                return Err(refused);
            }
            Ok(Box::new(allowed.into_iter()) as reqwest::dns::Addrs)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn only(entries: &[&str]) -> Policy {
        Policy {
            egress: Egress::Only(entries.iter().map(|e| Allowed::parse(e).unwrap()).collect()),
            ..Policy::default()
        }
    }

    #[test]
    fn a_cloud_metadata_address_is_refused_unless_named_exactly() {
        let metadata: IpAddr = "169.254.169.254".parse().unwrap();
        assert!(!Policy::default().allows(None, metadata));
        assert!(!only(&["169.254.0.0/16"]).allows(None, metadata));
        assert!(only(&["169.254.169.254"]).allows(None, metadata));
        assert!(!only(&["*.internal"]).allows(Some("metadata.google.internal"), metadata));
        let aws_v6: IpAddr = "fd00:ec2::254".parse().unwrap();
        assert!(!Policy::default().allows(None, aws_v6));
    }

    #[test]
    fn a_name_is_allowed_exactly_or_below_a_listed_domain() {
        let policy = only(&["api.stripe.com", "*.example.org"]);
        assert!(policy.allows_name("API.stripe.com."));
        assert!(policy.allows_name("hooks.example.org"));
        assert!(!policy.allows_name("example.org"));
        assert!(!policy.allows_name("api.stripe.com.evil.net"));
        assert!(policy.may_reach("api.stripe.com").is_ok());
        assert!(policy.may_reach("169.254.169.254").is_err());
    }

    #[test]
    fn an_address_is_allowed_by_its_network() {
        let policy = only(&["127.0.0.0/8", "::1"]);
        assert!(policy.allows(None, "127.0.0.1".parse().unwrap()));
        assert!(policy.allows(Some("localhost"), "::1".parse().unwrap()));
        assert!(!policy.allows(None, "10.0.0.1".parse().unwrap()));
        assert!(
            policy.may_reach("anything.example").is_ok(),
            "its addresses decide"
        );
    }

    #[test]
    fn an_entry_that_is_nothing_is_refused() {
        assert!(Allowed::parse("not a host!").is_err());
        assert!(Allowed::parse("").is_err());
    }

    #[test]
    fn a_secret_file_outside_the_directory_is_refused_also_through_dot_dot() {
        let dir = std::env::temp_dir().join(format!("z29c-policy-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let policy = Policy {
            secrets_dir: Some(dir.clone()),
            ..Policy::default()
        };
        assert!(policy.allows_file(&dir.join("payments")).is_ok());
        assert!(policy.allows_file(&dir.join("../../etc/shadow")).is_err());
        assert!(policy.allows_file(Path::new("/etc/shadow")).is_err());
        assert!(
            Policy::default()
                .allows_file(&dir.join("payments"))
                .is_err()
        );
    }
}
