//! The archive on disk (docs/DESIGN.md §21): a directory of day files, each a series of gzip
//! members of JSON lines (one member per batch the archiver moved), and beside each day file
//! its manifest: every member's offset, length, record count and SHA-256, and once the day is
//! over, the whole file's SHA-256 (what `sha256sum` prints).
//!
//! A member is appended and the file synced before the manifest names it; the manifest is
//! replaced whole (written beside, synced, renamed, the directory synced). Bytes past the
//! manifest's length are a member whose batch never committed: the next append cuts them off.
//! Everything here is blocking file I/O; the archiver runs it off the async threads.

use std::fs::{self, File, OpenOptions};
use std::io::{self, Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

use chrono::NaiveDate;
use flate2::Compression;
use flate2::read::MultiGzDecoder;
use flate2::write::GzEncoder;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

/// The archive format this build writes and reads; every record and manifest names it.
pub const FORMAT: &str = "z29c-archive/1";

/// One day's manifest, as `YYYY-MM-DD.manifest.json` holds it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Manifest {
    pub format: String,
    /// The day file it describes (`2026-12-06.jsonl.gz`).
    pub file: String,
    /// The file's length: bytes past it belong to no committed batch.
    pub bytes: u64,
    pub records: u64,
    pub members: Vec<Member>,
    /// The whole file's SHA-256, written once a later day has begun.
    pub sha256: Option<String>,
}

/// One gzip member of a day file: one batch.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Member {
    pub offset: u64,
    pub length: u64,
    pub records: u64,
    pub sha256: String,
}

/// Where an appended batch landed: what a tombstone keeps to read its record back.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Placed {
    pub file: String,
    pub offset: u64,
    pub length: u64,
}

impl Placed {
    /// The place a tombstone or a copy's note keeps, whose offsets PostgreSQL stores signed.
    pub fn stored(file: String, offset: i64, length: i64) -> Placed {
        Placed {
            file,
            offset: u64::try_from(offset).unwrap_or_default(),
            length: u64::try_from(length).unwrap_or_default(),
        }
    }
}

/// What `verify` found wrong with one day file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Finding {
    pub file: String,
    pub problem: String,
}

/// The archive directory.
#[derive(Debug, Clone)]
pub struct ArchiveDir {
    root: PathBuf,
}

impl ArchiveDir {
    /// The archive at `root`, created if it is not there yet.
    pub fn open(root: impl Into<PathBuf>) -> io::Result<Self> {
        let root = root.into();
        fs::create_dir_all(&root)?;
        Ok(Self { root })
    }

    /// The archive at `root`, as it is: for reading back, where nothing is written.
    pub fn at(root: impl Into<PathBuf>) -> Self {
        Self { root: root.into() }
    }

    pub fn root(&self) -> &Path {
        &self.root
    }

    /// Appends `lines` (one JSON record each) to `day`'s file as one gzip member, durably, and
    /// names the member in the day's manifest. Days before `day` left unsealed are sealed.
    pub fn append(&self, day: NaiveDate, lines: &[String]) -> io::Result<Placed> {
        self.seal_before(day)?;
        let name = day_file(day);
        let mut manifest = self
            .manifest(day)?
            .unwrap_or_else(|| Manifest::empty(&name));
        let mut gz = GzEncoder::new(Vec::new(), Compression::default());
        for line in lines {
            gz.write_all(line.as_bytes())?;
            gz.write_all(b"\n")?;
        }
        let member = gz.finish()?;
        let mut file = OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(self.root.join(&name))?;
        // Bytes past the manifest belong to a batch that never committed.
        file.set_len(manifest.bytes)?;
        file.seek(SeekFrom::Start(manifest.bytes))?;
        file.write_all(&member)?;
        file.sync_all()?;
        let placed = Placed {
            file: name,
            offset: manifest.bytes,
            length: member.len() as u64,
        };
        manifest.members.push(Member {
            offset: placed.offset,
            length: placed.length,
            records: lines.len() as u64,
            sha256: hex::encode(Sha256::digest(&member)),
        });
        manifest.bytes += placed.length;
        manifest.records += lines.len() as u64;
        self.write_manifest(day, &manifest)?;
        Ok(placed)
    }

    /// The lines of the member at `offset` (`length` bytes) of `file`, checked against the
    /// checksum its manifest names.
    pub fn read_member(&self, file: &str, offset: u64, length: u64) -> io::Result<Vec<String>> {
        let day = day_of(file)?;
        let manifest = self
            .manifest(day)?
            .ok_or_else(|| missing(format!("{file} has no manifest")))?;
        let member = manifest
            .members
            .iter()
            .find(|m| m.offset == offset && m.length == length)
            .ok_or_else(|| missing(format!("{file} names no member at byte {offset}")))?;
        let mut bytes = vec![0; usize::try_from(length).map_err(io::Error::other)?];
        let mut handle = File::open(self.root.join(file))?;
        handle.seek(SeekFrom::Start(offset))?;
        handle.read_exact(&mut bytes)?;
        if hex::encode(Sha256::digest(&bytes)) != member.sha256 {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                format!("{file} at byte {offset}: the checksum does not match its manifest"),
            ));
        }
        lines_of(&bytes)
    }

    /// Every day's manifest, oldest first.
    pub fn manifests(&self) -> io::Result<Vec<Manifest>> {
        let mut days: Vec<NaiveDate> = fs::read_dir(&self.root)?
            .filter_map(|e| e.ok())
            .filter_map(|e| {
                let name = e.file_name().into_string().ok()?;
                let day = name.strip_suffix(".manifest.json")?;
                NaiveDate::parse_from_str(day, "%Y-%m-%d").ok()
            })
            .collect();
        days.sort();
        days.into_iter()
            .filter_map(|day| self.manifest(day).transpose())
            .collect()
    }

    /// Reads every day file whole against its manifest: its length, each member's checksum
    /// and record count, and a sealed file's own checksum. Nothing found: the archive is whole.
    pub fn verify(&self) -> io::Result<Vec<Finding>> {
        let mut findings = Vec::new();
        for manifest in self.manifests()? {
            let problem = |problem: String| Finding {
                file: manifest.file.clone(),
                problem,
            };
            let bytes = match fs::read(self.root.join(&manifest.file)) {
                Ok(bytes) => bytes,
                Err(e) => {
                    findings.push(problem(format!("cannot be read: {e}")));
                    continue;
                }
            };
            findings.extend(check_file(&manifest, &bytes).into_iter().map(problem));
        }
        Ok(findings)
    }

    fn manifest(&self, day: NaiveDate) -> io::Result<Option<Manifest>> {
        match fs::read(self.root.join(manifest_file(day))) {
            Ok(bytes) => serde_json::from_slice(&bytes)
                .map(Some)
                .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e)),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// Replaces `day`'s manifest whole: written beside it, synced, renamed over it, and the
    /// directory synced, so a crash leaves the old manifest or the new one.
    fn write_manifest(&self, day: NaiveDate, manifest: &Manifest) -> io::Result<()> {
        let path = self.root.join(manifest_file(day));
        let beside = path.with_extension("json.next");
        let mut file = File::create(&beside)?;
        file.write_all(&serde_json::to_vec_pretty(manifest).map_err(io::Error::other)?)?;
        file.sync_all()?;
        fs::rename(&beside, &path)?;
        File::open(&self.root)?.sync_all()
    }

    /// Writes the whole-file checksum of every day before `day` that has none.
    fn seal_before(&self, day: NaiveDate) -> io::Result<()> {
        for mut manifest in self.manifests()? {
            let earlier = day_of(&manifest.file)?;
            if earlier >= day || manifest.sha256.is_some() {
                continue;
            }
            let mut file = File::open(self.root.join(&manifest.file))?;
            let mut hasher = Sha256::new();
            io::copy(&mut (&mut file).take(manifest.bytes), &mut hasher)?;
            manifest.sha256 = Some(hex::encode(hasher.finalize()));
            self.write_manifest(earlier, &manifest)?;
        }
        Ok(())
    }
}

impl Manifest {
    fn empty(file: &str) -> Self {
        Self {
            format: FORMAT.to_owned(),
            file: file.to_owned(),
            bytes: 0,
            records: 0,
            members: Vec::new(),
            sha256: None,
        }
    }
}

/// What is wrong with `bytes` as the file `manifest` describes (nothing: it is whole).
fn check_file(manifest: &Manifest, bytes: &[u8]) -> Vec<String> {
    let mut problems = Vec::new();
    if (bytes.len() as u64) < manifest.bytes {
        problems.push(format!(
            "is {} bytes long; its manifest names {}",
            bytes.len(),
            manifest.bytes
        ));
        return problems;
    }
    let named = &bytes[..manifest.bytes as usize];
    for member in &manifest.members {
        let Some(body) =
            named.get(member.offset as usize..(member.offset + member.length) as usize)
        else {
            problems.push(format!("has no member at byte {}", member.offset));
            continue;
        };
        if hex::encode(Sha256::digest(body)) != member.sha256 {
            problems.push(format!(
                "the member at byte {} does not match its checksum",
                member.offset
            ));
        } else if lines_of(body).map(|l| l.len() as u64).ok() != Some(member.records) {
            problems.push(format!(
                "the member at byte {} does not hold its {} record(s)",
                member.offset, member.records
            ));
        }
    }
    if let Some(sealed) = &manifest.sha256
        && &hex::encode(Sha256::digest(named)) != sealed
    {
        problems.push("does not match its checksum".to_owned());
    }
    problems
}

fn lines_of(member: &[u8]) -> io::Result<Vec<String>> {
    let mut text = String::new();
    MultiGzDecoder::new(member).read_to_string(&mut text)?;
    Ok(text.lines().map(str::to_owned).collect())
}

fn day_file(day: NaiveDate) -> String {
    format!("{}.jsonl.gz", day.format("%Y-%m-%d"))
}

fn manifest_file(day: NaiveDate) -> String {
    format!("{}.manifest.json", day.format("%Y-%m-%d"))
}

fn day_of(file: &str) -> io::Result<NaiveDate> {
    file.strip_suffix(".jsonl.gz")
        .and_then(|day| NaiveDate::parse_from_str(day, "%Y-%m-%d").ok())
        .ok_or_else(|| missing(format!("`{file}` is not a day file of the archive")))
}

fn missing(message: String) -> io::Error {
    io::Error::new(io::ErrorKind::NotFound, message)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn day(d: u32) -> NaiveDate {
        NaiveDate::from_ymd_opt(2026, 12, d).unwrap()
    }

    fn lines(n: usize, tag: &str) -> Vec<String> {
        (0..n)
            .map(|i| format!(r#"{{"n":{i},"tag":"{tag}"}}"#))
            .collect()
    }

    #[test]
    fn each_batch_reads_back_from_where_it_was_placed_and_the_archive_verifies() {
        let dir = tempfile::tempdir().unwrap();
        let archive = ArchiveDir::open(dir.path()).unwrap();
        let first = archive.append(day(6), &lines(3, "a")).unwrap();
        let second = archive.append(day(6), &lines(2, "b")).unwrap();
        assert_eq!(second.offset, first.length);
        assert_eq!(
            archive
                .read_member(&second.file, second.offset, second.length)
                .unwrap(),
            lines(2, "b")
        );
        // Seen whole, the day file is one gzip stream of both batches.
        let mut all = String::new();
        MultiGzDecoder::new(File::open(dir.path().join(&first.file)).unwrap())
            .read_to_string(&mut all)
            .unwrap();
        assert_eq!(all.lines().count(), 5);
        assert!(archive.verify().unwrap().is_empty());
    }

    #[test]
    fn a_member_no_manifest_names_is_cut_off_by_the_next_append() {
        let dir = tempfile::tempdir().unwrap();
        let archive = ArchiveDir::open(dir.path()).unwrap();
        let first = archive.append(day(6), &lines(1, "a")).unwrap();
        // A crash after the member was written, before its manifest.
        let mut file = OpenOptions::new()
            .append(true)
            .open(dir.path().join(&first.file))
            .unwrap();
        file.write_all(b"half a member").unwrap();
        let second = archive.append(day(6), &lines(1, "b")).unwrap();
        assert_eq!(second.offset, first.length);
        assert!(archive.verify().unwrap().is_empty());
    }

    #[test]
    fn a_day_is_sealed_with_its_checksum_once_the_next_begins_and_a_changed_byte_is_found() {
        let dir = tempfile::tempdir().unwrap();
        let archive = ArchiveDir::open(dir.path()).unwrap();
        let placed = archive.append(day(5), &lines(4, "a")).unwrap();
        archive.append(day(6), &lines(1, "b")).unwrap();
        let sealed = &archive.manifests().unwrap()[0];
        let bytes = fs::read(dir.path().join(&placed.file)).unwrap();
        assert_eq!(
            sealed.sha256.as_deref(),
            Some(hex::encode(Sha256::digest(&bytes)).as_str())
        );
        let mut changed = bytes.clone();
        changed[12] ^= 1;
        fs::write(dir.path().join(&placed.file), changed).unwrap();
        let findings = archive.verify().unwrap();
        assert_eq!(findings.len(), 2, "{findings:?}");
        assert!(findings.iter().all(|f| f.file == placed.file));
        assert!(
            archive
                .read_member(&placed.file, placed.offset, placed.length)
                .unwrap_err()
                .to_string()
                .contains("checksum")
        );
    }
}
