//! Files written whole or not at all: the data goes to a temporary file in the same
//! directory, is flushed to the disk, and replaces the target by a rename, so a crash, a full
//! disk or a failed serialisation never leaves a half-written profile, model or result.

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

/// Writes `path` through `fill`, atomically: `fill` writes into a temporary file beside
/// `path`, which replaces `path` only when `fill` and the flush to disk succeed; on any error
/// the temporary file is removed and `path` is left as it was.
///
/// ```
/// let dir = std::env::temp_dir().join(format!("ttgt-files-doc-{}", std::process::id()));
/// std::fs::create_dir_all(&dir).unwrap();
/// let p = dir.join("a.txt");
/// ttgt::files::write_atomic(&p, |w| std::io::Write::write_all(w, b"one")).unwrap();
/// let failed = ttgt::files::write_atomic(&p, |w| {
///     std::io::Write::write_all(w, b"half")?;
///     Err(std::io::Error::other("serialisation failed"))
/// });
/// assert!(failed.is_err());
/// assert_eq!(std::fs::read_to_string(&p).unwrap(), "one"); // untouched
/// assert_eq!(std::fs::read_dir(&dir).unwrap().count(), 1); // no temporary file left
/// std::fs::remove_dir_all(&dir).unwrap();
/// ```
pub fn write_atomic(
    path: &Path,
    fill: impl FnOnce(&mut BufWriter<File>) -> std::io::Result<()>,
) -> std::io::Result<()> {
    let tmp = temporary_beside(path)?;
    let result = (|| {
        let mut w = BufWriter::new(File::create(&tmp)?);
        fill(&mut w)?;
        let file = w.into_inner().map_err(|e| e.into_error())?;
        file.sync_all()?;
        std::fs::rename(&tmp, path)
    })();
    if result.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    result
}

/// A name for a temporary file in `path`'s directory, unique within this process.
fn temporary_beside(path: &Path) -> std::io::Result<PathBuf> {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let name = path.file_name().ok_or_else(|| {
        std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            format!("{} names no file", path.display()),
        )
    })?;
    let mut tmp = std::ffi::OsString::from(".");
    tmp.push(name);
    tmp.push(format!(
        ".tmp-{}-{}",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    ));
    Ok(path.with_file_name(tmp))
}

/// Whether `a` and `b` name the same existing file (after following links); false when
/// either does not exist.
///
/// ```
/// let p = std::env::temp_dir().join(format!("ttgt-same-doc-{}", std::process::id()));
/// std::fs::write(&p, b"x").unwrap();
/// let dotted = p.parent().unwrap().join(".").join(p.file_name().unwrap());
/// assert!(ttgt::files::same_file(&p, &dotted));
/// assert!(!ttgt::files::same_file(&p, &p.with_extension("missing")));
/// std::fs::remove_file(&p).unwrap();
/// ```
pub fn same_file(a: &Path, b: &Path) -> bool {
    match (std::fs::canonicalize(a), std::fs::canonicalize(b)) {
        (Ok(x), Ok(y)) => x == y,
        _ => false,
    }
}

/// Reads a stored file that ttgt made (the calibration profile, a GPU model) and parses it;
/// `None` when it does not exist. A file that exists but cannot be read or parsed is
/// reported once per process and path on stderr (`what` names it, `remedy` says how to make
/// a new one) and is treated as absent.
pub(crate) fn load_stored<T, E: std::fmt::Display>(
    path: &Path,
    what: &str,
    remedy: &str,
    parse: impl FnOnce(&str) -> Result<T, E>,
) -> Option<T> {
    let why = match std::fs::read_to_string(path) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return None,
        Err(e) => e.to_string(),
        Ok(text) => match parse(&text) {
            Ok(v) => return Some(v),
            Err(e) => e.to_string(),
        },
    };
    static REPORTED: std::sync::Mutex<Vec<PathBuf>> = std::sync::Mutex::new(Vec::new());
    let mut seen = REPORTED.lock().unwrap_or_else(|e| e.into_inner());
    if !seen.iter().any(|p| p == path) {
        seen.push(path.to_path_buf());
        eprintln!(
            "ttgt: ignoring the {what} {} ({why}); using built-in values ({remedy})",
            path.display()
        );
    }
    None
}

/// `write_atomic` of a byte string.
pub(crate) fn write_bytes_atomic(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    write_atomic(path, |w| w.write_all(bytes))
}
