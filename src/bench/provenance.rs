//! What a benchmark record needs to be compared with another: the spread of the timed samples
//! ([`Samples`]) and where and when it ran ([`Provenance`]: CPU, cores, memory, ttgt version
//! and commit, date).

use std::time::{SystemTime, UNIX_EPOCH};

/// The timed samples of one measurement: best, median and count.
///
/// ```
/// use ttgt::bench::Samples;
/// let s = Samples::of(&[3.0, 1.0, 2.0, 10.0]);
/// assert_eq!((s.min, s.median, s.count), (1.0, 2.5, 4));
/// assert_eq!(Samples::of(&[]).count, 0);
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Samples {
    /// The smallest sample (what the tables report: the least disturbed run).
    pub min: f64,
    /// The median sample.
    pub median: f64,
    /// How many samples were taken.
    pub count: usize,
}

impl Samples {
    /// The summary of `samples` (NaN and zero count for none).
    pub fn of(samples: &[f64]) -> Samples {
        if samples.is_empty() {
            return Samples {
                min: f64::NAN,
                median: f64::NAN,
                count: 0,
            };
        }
        let mut v = samples.to_vec();
        v.sort_by(f64::total_cmp);
        let n = v.len();
        let median = if n % 2 == 1 {
            v[n / 2]
        } else {
            (v[n / 2 - 1] + v[n / 2]) / 2.0
        };
        Samples {
            min: v[0],
            median,
            count: n,
        }
    }
}

/// Where and when a benchmark ran.
///
/// ```
/// let p = ttgt::bench::Provenance::current();
/// assert!(p.cores >= 1);
/// assert_eq!(p.version, env!("CARGO_PKG_VERSION"));
/// assert!(p.date.len() == 20 && p.date.ends_with('Z')); // ISO 8601, UTC, whole seconds
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Provenance {
    /// The CPU's model name (`/proc/cpuinfo`), or "unknown".
    pub cpu_model: String,
    /// Cores this process may run on.
    pub cores: usize,
    /// Physical memory in bytes (0 when unknown).
    pub memory_bytes: u64,
    /// The ttgt version.
    pub version: String,
    /// The git commit the binary was built from, or "unknown".
    pub commit: String,
    /// The operating system and architecture.
    pub os: String,
    /// When the record was made, UTC, ISO 8601.
    pub date: String,
}

impl Provenance {
    /// This machine and build, now.
    pub fn current() -> Provenance {
        Provenance {
            cpu_model: cpu_model().unwrap_or_else(|| "unknown".into()),
            cores: std::thread::available_parallelism().map_or(1, |n| n.get()),
            memory_bytes: memory_bytes().unwrap_or(0),
            version: env!("CARGO_PKG_VERSION").to_string(),
            commit: env!("TTGT_GIT_COMMIT").to_string(),
            os: format!("{}-{}", std::env::consts::OS, std::env::consts::ARCH),
            date: iso_date(SystemTime::now()),
        }
    }
}

fn cpu_model() -> Option<String> {
    let info = std::fs::read_to_string("/proc/cpuinfo").ok()?;
    info.lines()
        .find(|l| l.starts_with("model name"))
        .and_then(|l| l.split_once(':'))
        .map(|(_, v)| v.trim().to_string())
}

fn memory_bytes() -> Option<u64> {
    let info = std::fs::read_to_string("/proc/meminfo").ok()?;
    let kib: u64 = info
        .lines()
        .find(|l| l.starts_with("MemTotal:"))?
        .split_whitespace()
        .nth(1)?
        .parse()
        .ok()?;
    Some(kib * 1024)
}

/// `t` as `YYYY-MM-DDThh:mm:ssZ` (proleptic Gregorian calendar, UTC).
fn iso_date(t: SystemTime) -> String {
    let secs = t.duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs());
    let (days, rest) = (secs / 86_400, secs % 86_400);
    let (y, m, d) = civil_from_days(days as i64);
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}Z",
        rest / 3600,
        rest / 60 % 60,
        rest % 60
    )
}

/// (year, month, day) of the day `z` days after 1970-01-01 (the era-based conversion:
/// 400-year eras of 146097 days, years starting in March so the leap day comes last).
fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let y = yoe + era * 400 + i64::from(m <= 2);
    (y, m, d)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn dates_match_known_days() {
        let at = |s: u64| iso_date(UNIX_EPOCH + Duration::from_secs(s));
        assert_eq!(at(0), "1970-01-01T00:00:00Z");
        assert_eq!(at(951_782_400), "2000-02-29T00:00:00Z");
        assert_eq!(at(1_709_210_096), "2024-02-29T12:34:56Z");
        assert_eq!(at(4_102_444_799), "2099-12-31T23:59:59Z");
    }

    #[test]
    fn median_of_even_and_odd_counts() {
        assert_eq!(Samples::of(&[5.0]).median, 5.0);
        assert_eq!(Samples::of(&[4.0, 1.0]).median, 2.5);
        assert_eq!(Samples::of(&[4.0, 1.0, 9.0]).median, 4.0);
        assert!(Samples::of(&[]).min.is_nan());
    }
}
