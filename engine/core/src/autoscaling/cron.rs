//! CronFederatedHPA schedules: standard five-field cron expressions (and the `@hourly`-style
//! shorthands), evaluated in an IANA time zone, as Karmada's gocron scheduler runs them.
//! Parsing is croner's; zones are chrono-tz's database.

use chrono::{DateTime, TimeZone as _, Utc};
use chrono_tz::Tz;

/// The longest schedule accepted (bytes).
pub const MAX_SCHEDULE: usize = 256;
/// The longest time zone name accepted (bytes).
pub const MAX_TIME_ZONE: usize = 64;

/// Why a schedule or a time zone was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Error {
    /// The expression does not parse.
    #[error("{0}")]
    Schedule(String),
    /// The zone is unknown.
    #[error("unknown time zone {0}")]
    TimeZone(String),
    /// Too long.
    #[error("longer than {0} bytes")]
    TooLong(usize),
}

/// A parsed schedule in its zone.
#[derive(Debug, Clone)]
pub struct Schedule {
    cron: croner::Cron,
    zone: Tz,
}

/// The zone named `name` (Go's `time.LoadLocation`: `""` and `UTC` are UTC; `Local` is the
/// controller's zone, which is UTC here).
///
/// # Errors
/// An unknown or over-long name.
pub fn time_zone(name: &str) -> Result<Tz, Error> {
    if name.len() > MAX_TIME_ZONE {
        return Err(Error::TooLong(MAX_TIME_ZONE));
    }
    match name {
        "" | "UTC" | "Local" => Ok(Tz::UTC),
        _ => name
            .parse::<Tz>()
            .map_err(|_| Error::TimeZone(name.to_owned())),
    }
}

impl Schedule {
    /// Parse `expression` (five fields: minute, hour, day of month, month, day of week; no
    /// seconds or years) for `zone` (see [`time_zone`]; `None` is UTC).
    ///
    /// # Errors
    /// A malformed expression, an unknown zone, or over-long input.
    pub fn parse(expression: &str, zone: Option<&str>) -> Result<Self, Error> {
        if expression.len() > MAX_SCHEDULE {
            return Err(Error::TooLong(MAX_SCHEDULE));
        }
        let zone = time_zone(zone.unwrap_or(""))?;
        let parser = croner::parser::CronParser::builder()
            .seconds(croner::parser::Seconds::Disallowed)
            .year(croner::parser::Year::Disallowed)
            .build();
        let cron = parser
            .parse(expression.trim())
            .map_err(|e| Error::Schedule(e.to_string()))?;
        Ok(Schedule { cron, zone })
    }

    /// The first time the schedule fires strictly after `after` (epoch seconds), as epoch
    /// seconds; `None` when it never does (within croner's search horizon).
    pub fn next_after(&self, after: i64) -> Option<i64> {
        let at: DateTime<Tz> = self.zone.timestamp_opt(after, 0).single()?;
        self.cron
            .find_next_occurrence(&at, false)
            .ok()
            .map(|t| t.with_timezone(&Utc).timestamp())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn epoch(s: &str) -> i64 {
        crate::time::parse_rfc3339(s).expect("time")
    }

    #[test]
    fn schedules_fire_at_the_next_matching_minute_in_their_zone() {
        let s = Schedule::parse("30 8 * * *", None).expect("parse");
        assert_eq!(
            s.next_after(epoch("2026-03-01T08:00:00Z")),
            Some(epoch("2026-03-01T08:30:00Z"))
        );
        assert_eq!(
            s.next_after(epoch("2026-03-01T08:30:00Z")),
            Some(epoch("2026-03-02T08:30:00Z")),
            "strictly after"
        );
        // 08:30 in Shanghai (UTC+8) is 00:30 UTC.
        let s = Schedule::parse("30 8 * * *", Some("Asia/Shanghai")).expect("parse");
        assert_eq!(
            s.next_after(epoch("2026-03-01T00:00:00Z")),
            Some(epoch("2026-03-01T00:30:00Z"))
        );
        let s = Schedule::parse("@hourly", None).expect("shorthand");
        assert_eq!(
            s.next_after(epoch("2026-03-01T00:10:00Z")),
            Some(epoch("2026-03-01T01:00:00Z"))
        );
        let s = Schedule::parse("*/5 * * * 1-5", None).expect("parse");
        // 2026-03-01 is a Sunday: the next weekday minute is Monday 00:00.
        assert_eq!(
            s.next_after(epoch("2026-03-01T12:00:00Z")),
            Some(epoch("2026-03-02T00:00:00Z"))
        );
    }

    #[test]
    fn malformed_schedules_and_zones_are_refused() {
        for bad in [
            "",
            "* * * *",
            "61 * * * *",
            "0 0 0 * * * *",
            "* * * * * *",
            "nonsense",
        ] {
            assert!(Schedule::parse(bad, None).is_err(), "{bad:?}");
        }
        assert!(matches!(
            Schedule::parse("* * * * *", Some("Mars/Olympus")),
            Err(Error::TimeZone(_))
        ));
        assert_eq!(
            Schedule::parse(&"*".repeat(300), None).err(),
            Some(Error::TooLong(MAX_SCHEDULE))
        );
        assert_eq!(time_zone("Local"), Ok(Tz::UTC));
        assert!(time_zone(&"A".repeat(100)).is_err());
    }
}
