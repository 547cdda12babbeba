//! The built front end's file names. The workspace's cargo-leptos settings turn on
//! `hash-files`: the JS, wasm and CSS under `/pkg/` are named by a hash of their content, so
//! the server may let browsers cache them for a year (docs/DESIGN.md §18), and cargo-leptos
//! writes the hashes to a file beside the server binary. Leptos's `HydrationScripts` reads that
//! file for the script and wasm; the stylesheet's name is read here the same way.

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
        let hashes = if options.hash_files {
            std::fs::read_to_string(hash_file(options)).unwrap_or_default()
        } else {
            String::new()
        };
        let name = |extension: &str, plain: &str| {
            let hash = hashes.lines().find_map(|line| {
                let (kind, hash) = line.split_once(':')?;
                (kind.trim() == extension).then(|| hash.trim().to_owned())
            });
            match hash {
                Some(hash) => format!("{}.{hash}.{extension}", options.output_name),
                None => format!("{plain}.{extension}"),
            }
        };
        let output = options.output_name.to_string();
        Assets {
            js: name("js", &output),
            wasm: name("wasm", &output),
            css: name("css", &output),
        }
    }
}
