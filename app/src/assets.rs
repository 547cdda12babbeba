//! The built front end's file names. The workspace's cargo-leptos settings turn on
//! `hash-files`: the JS, wasm and CSS under `/pkg/` are named by a hash of their content, so
//! the server may let browsers cache them for a year (docs/DESIGN.md §18), and cargo-leptos
//! writes the hashes to a file beside the server binary. Leptos's `HydrationScripts` reads that
//! file for the script and wasm; the stylesheet's name, and the split wasm's chunks each island
//! needs, are read here the same way.

use std::path::PathBuf;

use leptos::config::LeptosOptions;

/// Where cargo-leptos wrote the hashes for the running binary (`hash.txt` beside it).
pub fn hash_file(options: &LeptosOptions) -> PathBuf {
    std::env::current_exe()
        .ok()
        .and_then(|exe| exe.parent().map(PathBuf::from))
        .unwrap_or_default()
        .join(options.hash_file.as_ref())
}

/// The file names of the built front end, relative to the site's package directory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Assets {
    pub js: String,
    pub wasm: String,
    pub css: String,
}

impl Assets {
    /// The names the running server refers to: hashed when `options.hash_files` is set and the
    /// hash file names them, plain otherwise.
    pub fn of(options: &LeptosOptions) -> Self {
        let hashes = hashes(options);
        let name = |extension: &str, plain: &str| match hash_of(&hashes, extension) {
            Some(hash) => format!("{}.{hash}.{extension}", options.output_name),
            None => format!("{plain}.{extension}"),
        };
        let output = options.output_name.to_string();
        Assets {
            js: name("js", &output),
            wasm: name("wasm", &output),
            css: name("css", &output),
        }
    }
}

/// The hash file's text when the build names its files by hash (empty otherwise).
fn hashes(options: &LeptosOptions) -> String {
    if options.hash_files {
        std::fs::read_to_string(hash_file(options)).unwrap_or_default()
    } else {
        String::new()
    }
}

/// The hash the hash file's text `hashes` gives files of `kind` (`js`, `wasm`, `manifest`, …).
pub fn hash_of(hashes: &str, kind: &str) -> Option<String> {
    hashes.lines().find_map(|line| {
        let (k, hash) = line.split_once(':')?;
        (k.trim() == kind).then(|| hash.trim().to_owned())
    })
}

/// The split wasm (`cargo leptos build --split`): the loader the main module imports, and per
/// island (its component's name in snake case, `step_action_form`) the chunks it fetches when a
/// page holds it, named as under `/pkg/`. Empty for a build that was not split or not hashed.
#[cfg(feature = "ssr")]
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Split {
    pub loader: Option<String>,
    pub chunks: std::collections::BTreeMap<String, Vec<String>>,
}

#[cfg(feature = "ssr")]
impl Split {
    /// The running build's, from the manifest cargo-leptos wrote beside the chunks.
    pub fn of(options: &LeptosOptions) -> Self {
        let hashes = hashes(options);
        let pkg =
            std::path::Path::new(options.site_root.as_ref()).join(options.site_pkg_dir.as_ref());
        let manifest = hash_of(&hashes, "manifest").and_then(|hash| {
            std::fs::read_to_string(pkg.join(format!("__wasm_split_manifest.{hash}.json"))).ok()
        });
        Split {
            loader: hash_of(&hashes, "split").map(|hash| format!("__wasm_split.{hash}.js")),
            chunks: manifest
                .as_deref()
                .map(Split::chunks_in)
                .unwrap_or_default(),
        }
    }

    /// Each island's chunks in the manifest's text `manifest`, which names each island's loader
    /// (`<island>_loader_<n>`) and the files it fetches, without their `.wasm`.
    pub fn chunks_in(manifest: &str) -> std::collections::BTreeMap<String, Vec<String>> {
        let loaders: std::collections::BTreeMap<String, Vec<String>> =
            serde_json::from_str(manifest).unwrap_or_default();
        loaders
            .into_iter()
            .filter_map(|(loader, files)| {
                let (island, _) = loader.rsplit_once("_loader_")?;
                Some((
                    island.to_owned(),
                    files.into_iter().map(|f| format!("{f}.wasm")).collect(),
                ))
            })
            .collect()
    }
}

#[cfg(all(test, feature = "ssr"))]
mod tests {
    use super::Split;

    #[test]
    fn each_island_fetches_the_chunks_the_manifest_lists_for_its_loader() {
        let manifest = r#"{"live_overview_loader_181":["chunk_4.aa","split_live_overview_loader_181.bb"],
                           "step_action_form_loader_853":["chunk_4.aa","chunk_6.cc"]}"#;
        let chunks = Split::chunks_in(manifest);
        assert_eq!(
            chunks["live_overview"],
            ["chunk_4.aa.wasm", "split_live_overview_loader_181.bb.wasm"]
        );
        assert_eq!(
            chunks["step_action_form"],
            ["chunk_4.aa.wasm", "chunk_6.cc.wasm"]
        );
        assert_eq!(chunks.len(), 2);
        assert!(Split::chunks_in("not json").is_empty());
    }
}
