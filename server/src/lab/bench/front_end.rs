//! The console's front end as built, for `z29c bench console`: the files the running build names
//! (`hash.txt` beside the binary) and what each island adds to them, as the server sends them.

use std::path::{Path, PathBuf};

/// One built file's bytes: raw, gzipped (`gzip -9`), and its brotli copy's when the build wrote
/// one (release builds do).
#[derive(Debug, Clone, Copy)]
struct Sizes {
    raw: u64,
    gzipped: u64,
    brotli: Option<u64>,
}

impl Sizes {
    fn of(path: &Path) -> Option<Sizes> {
        let raw = std::fs::metadata(path).ok()?.len();
        let gzipped = std::process::Command::new("gzip")
            .arg("-9")
            .arg("-c")
            .arg(path)
            .output()
            .ok()?
            .stdout
            .len() as u64;
        let mut brotli = path.as_os_str().to_owned();
        brotli.push(".br");
        let brotli = std::fs::metadata(brotli).ok().map(|m| m.len());
        Some(Sizes {
            raw,
            gzipped,
            brotli,
        })
    }

    fn sum<'a>(all: impl IntoIterator<Item = &'a Sizes>) -> Sizes {
        all.into_iter().fold(
            Sizes {
                raw: 0,
                gzipped: 0,
                brotli: Some(0),
            },
            |total, s| Sizes {
                raw: total.raw + s.raw,
                gzipped: total.gzipped + s.gzipped,
                brotli: total.brotli.zip(s.brotli).map(|(a, b)| a + b),
            },
        )
    }
}

impl std::fmt::Display for Sizes {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let kb = |bytes: u64| bytes / 1024;
        write!(f, "{} KB ({} KB gzipped", kb(self.raw), kb(self.gzipped))?;
        match self.brotli {
            Some(brotli) => write!(f, ", {} KB brotli)", kb(brotli)),
            None => write!(f, ")"),
        }
    }
}

/// Prints the weight of the build the server will send: its main JS, wasm and CSS, the loader
/// of the split wasm, and per island the chunks a page holding it fetches besides. An error says
/// why the site is no measure of what users load: missing, or a debug build (no brotli copies).
pub fn weight(site_root: &Path) -> Result<(), String> {
    let pkg = site_root.join("pkg");
    let missing = || {
        format!(
            "no build under {} (run `make build PROFILE=release` first)",
            pkg.display()
        )
    };
    let hashes = std::env::current_exe()
        .ok()
        .and_then(|exe| std::fs::read_to_string(exe.with_file_name("hash.txt")).ok())
        .ok_or_else(missing)?;
    let file = |stem: &str, kind: &str, extension: &str| -> Option<(PathBuf, Sizes)> {
        let path = pkg.join(format!(
            "{stem}.{}.{extension}",
            app::assets::hash_of(&hashes, kind)?
        ));
        Sizes::of(&path).map(|sizes| (path, sizes))
    };
    let main = [
        ("js", file("z29c", "js", "js")),
        ("wasm", file("z29c", "wasm", "wasm")),
        ("css", file("z29c", "css", "css")),
        ("split loader", file("__wasm_split", "split", "js")),
    ];
    let mut described = Vec::new();
    for (name, built) in &main {
        let (_, sizes) = built.as_ref().ok_or_else(missing)?;
        described.push(format!("{name} {sizes}"));
    }
    println!(
        "front end as built ({}): {}",
        pkg.display(),
        described.join(" + ")
    );
    let islands = file("__wasm_split_manifest", "manifest", "json")
        .and_then(|(path, _)| island_chunks(&pkg, &path))
        .ok_or_else(missing)?;
    for (island, sizes) in &islands {
        println!("  a page holding {island} also fetches {sizes}");
    }
    let all = main.iter().filter_map(|(_, built)| built.as_ref());
    if all
        .map(|(_, s)| s)
        .chain(islands.iter().map(|(_, s)| s))
        .any(|s| s.brotli.is_none())
    {
        return Err(format!(
            "{} holds a debug build (no brotli copies): build it with `make build PROFILE=release`",
            pkg.display()
        ));
    }
    Ok(())
}

/// Each island's name and the summed sizes of the wasm chunks its loader fetches, from the
/// manifest cargo-leptos wrote beside them.
fn island_chunks(pkg: &Path, manifest: &Path) -> Option<Vec<(String, Sizes)>> {
    let text = std::fs::read_to_string(manifest).ok()?;
    app::assets::Split::chunks_in(&text)
        .into_iter()
        .map(|(island, chunks)| {
            let sizes: Option<Vec<Sizes>> =
                chunks.iter().map(|c| Sizes::of(&pkg.join(c))).collect();
            Some((island, Sizes::sum(&sizes?)))
        })
        .collect()
}
