//! Rotation periods as pure functions over Unix milliseconds: which period an event
//! belongs to, the label a rotated file carries, and the label's age in days. All periods
//! are UTC, so a log means the same thing on every machine and across DST changes.
//!
//! Invariant: nothing here reads a clock; callers pass the time (the writer's injected
//! clock, or a test's).

/// How often the active file is rotated (`WINX_USAGE_LOG_ROTATION`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Rotation {
    Daily,
    Hourly,
    Never,
}

impl Rotation {
    pub fn parse(s: &str) -> Option<Rotation> {
        match s {
            "daily" => Some(Rotation::Daily),
            "hourly" => Some(Rotation::Hourly),
            "never" => Some(Rotation::Never),
            _ => None,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Rotation::Daily => "daily",
            Rotation::Hourly => "hourly",
            Rotation::Never => "never",
        }
    }

    /// The label of the period holding `ms`: `2026-01-31` (daily), `2026-01-31T13`
    /// (hourly), `None` when files never rotate.
    pub fn label(self, ms: i64) -> Option<String> {
        let (y, m, d, h) = civil(ms);
        match self {
            Rotation::Daily => Some(format!("{y:04}-{m:02}-{d:02}")),
            Rotation::Hourly => Some(format!("{y:04}-{m:02}-{d:02}T{h:02}")),
            Rotation::Never => None,
        }
    }
}

const MS_PER_DAY: i64 = 86_400_000;
const MS_PER_HOUR: i64 = 3_600_000;

/// Days since 1970-01-01 of a proleptic Gregorian date (Howard Hinnant's algorithm).
pub fn days_from_civil(y: i64, m: u32, d: u32) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let m = m as i64;
    let doy = (153 * (if m > 2 { m - 3 } else { m + 9 }) + 2) / 5 + d as i64 - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// (year, month, day, hour) in UTC of `ms`.
pub fn civil(ms: i64) -> (i64, u32, u32, u32) {
    let days = ms.div_euclid(MS_PER_DAY);
    let hour = (ms.rem_euclid(MS_PER_DAY) / MS_PER_HOUR) as u32;
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let y = yoe + era * 400 + i64::from(m <= 2);
    (y, m, d, hour)
}

/// The start (Unix ms) of the period a rotated file's label names: `2026-01-31` or
/// `2026-01-31T13`, optionally followed by `.N` (a collision suffix). `None` for anything
/// else, so files that are not ours are never pruned.
pub fn label_start_ms(label: &str) -> Option<i64> {
    let (base, n) = label.split_once('.').unwrap_or((label, "0"));
    if n.is_empty() || !n.bytes().all(|c| c.is_ascii_digit()) {
        return None;
    }
    let b = base.as_bytes();
    let digits = |r: std::ops::Range<usize>| -> Option<i64> {
        let s = base.get(r)?;
        s.bytes()
            .all(|c| c.is_ascii_digit())
            .then(|| s.parse().ok())
            .flatten()
    };
    if !(base.len() == 10 || base.len() == 13) || b[4] != b'-' || b[7] != b'-' {
        return None;
    }
    let (y, m, d) = (digits(0..4)?, digits(5..7)?, digits(8..10)?);
    if !(1..=12).contains(&m) || !(1..=31).contains(&d) {
        return None;
    }
    let mut ms = days_from_civil(y, m as u32, d as u32) * MS_PER_DAY;
    if base.len() == 13 {
        if b[10] != b'T' {
            return None;
        }
        let h = digits(11..13)?;
        if h > 23 {
            return None;
        }
        ms += h * MS_PER_HOUR;
    }
    Some(ms)
}

/// Whether a rotated file labelled `label` is past `keep_days` at `now_ms`: its period
/// started before the start of the day `keep_days` days ago (0 keeps everything).
pub fn expired(label: &str, keep_days: u32, now_ms: i64) -> bool {
    if keep_days == 0 {
        return false;
    }
    let Some(start) = label_start_ms(label) else {
        return false;
    };
    let today = now_ms.div_euclid(MS_PER_DAY) * MS_PER_DAY;
    start < today - i64::from(keep_days) * MS_PER_DAY
}

/// `ms` as `2026-01-31T13:04:05Z` (for reports and messages).
pub fn iso(ms: i64) -> String {
    let (y, m, d, h) = civil(ms);
    let secs = ms.rem_euclid(MS_PER_HOUR) / 1000;
    format!(
        "{y:04}-{m:02}-{d:02}T{h:02}:{:02}:{:02}Z",
        secs / 60,
        secs % 60
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    /// 2026-03-01T23:59:59.999Z and one millisecond later.
    const BEFORE_MIDNIGHT: i64 = 1_772_409_599_999;

    #[test]
    fn civil_round_trips_and_knows_leap_years() {
        assert_eq!(civil(0), (1970, 1, 1, 0));
        assert_eq!(civil(BEFORE_MIDNIGHT), (2026, 3, 1, 23));
        assert_eq!(civil(BEFORE_MIDNIGHT + 1), (2026, 3, 2, 0));
        assert_eq!(
            days_from_civil(2024, 2, 29) + 1,
            days_from_civil(2024, 3, 1)
        );
        for days in [-1000, 0, 1, 59, 365, 10_957, 20_000, 100_000] {
            let (y, m, d, _) = civil(days * MS_PER_DAY);
            assert_eq!(days_from_civil(y, m, d), days);
        }
        assert_eq!(iso(BEFORE_MIDNIGHT), "2026-03-01T23:59:59Z");
    }

    #[test]
    fn labels_change_at_day_and_hour_boundaries() {
        let d = Rotation::Daily;
        assert_eq!(d.label(BEFORE_MIDNIGHT).unwrap(), "2026-03-01");
        assert_eq!(d.label(BEFORE_MIDNIGHT + 1).unwrap(), "2026-03-02");
        let h = Rotation::Hourly;
        assert_eq!(h.label(BEFORE_MIDNIGHT).unwrap(), "2026-03-01T23");
        assert_eq!(h.label(BEFORE_MIDNIGHT + 1).unwrap(), "2026-03-02T00");
        assert_eq!(Rotation::Never.label(BEFORE_MIDNIGHT), None);
        assert_eq!(
            label_start_ms("2026-03-02"),
            Some(BEFORE_MIDNIGHT + 1),
            "a label names its period's start"
        );
        assert_eq!(
            label_start_ms("2026-03-01T23.2"),
            Some(BEFORE_MIDNIGHT + 1 - MS_PER_HOUR)
        );
        for bad in [
            "",
            "2026-3-01",
            "2026-13-01",
            "2026-03-01T24",
            "x026-03-01",
            "gz",
            "2026-03-01.gz",
            "2026-03-01.",
        ] {
            assert_eq!(label_start_ms(bad), None, "{bad}");
        }
    }

    #[test]
    fn expiry_counts_whole_days_and_zero_keeps_all() {
        let now = BEFORE_MIDNIGHT + 1; // 2026-03-02T00:00
        assert!(!expired("2026-03-01", 1, now));
        assert!(expired("2026-02-28", 1, now));
        assert!(!expired("2026-02-23", 7, now));
        assert!(expired("2026-02-22T23", 7, now));
        assert!(!expired("2020-01-01", 0, now));
        assert!(!expired("not-a-date", 1, now));
    }
}
