//! Times as people type them: `2026-11-01` (UTC midnight), `2026-11-01T10:00:00Z`, a span back
//! from now (`48h`, `7d`, `90m`), or Unix seconds.

/// Parses `text` into Unix seconds, spans counting back from `now_secs`.
///
/// # Errors
/// A message with the accepted forms.
pub fn parse_when(text: &str, now_secs: i64) -> Result<i64, String> {
    let text = text.trim();
    let hint = || {
        format!(
            "{text:?} is not a time: use a date (2026-11-01), a UTC time (2026-11-01T10:00:00Z), a span back from now (48h, 7d, 90m) or Unix seconds"
        )
    };
    if let Ok(secs) = text.parse::<i64>() {
        return Ok(secs);
    }
    if let Ok(ts) = text.parse::<jiff::Timestamp>() {
        return Ok(ts.as_second());
    }
    if let Ok(date) = text.parse::<jiff::civil::Date>() {
        let midnight = jiff::tz::TimeZone::UTC
            .to_timestamp(date.to_datetime(jiff::civil::Time::midnight()))
            .map_err(|_| hint())?;
        return Ok(midnight.as_second());
    }
    let (number, unit) = text.split_at(text.find(|c: char| !c.is_ascii_digit()).ok_or_else(hint)?);
    let n: i64 = number.parse().map_err(|_| hint())?;
    let secs = match unit {
        "s" => 1,
        "m" | "min" => 60,
        "h" => 3600,
        "d" => 86_400,
        "w" => 7 * 86_400,
        _ => return Err(hint()),
    };
    Ok(now_secs - n * secs)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_documented_form_parses() {
        let now = 1_764_500_000;
        assert_eq!(parse_when("2026-11-01", now), Ok(1_793_491_200));
        assert_eq!(parse_when("2026-11-01T10:00:00Z", now), Ok(1_793_527_200));
        assert_eq!(parse_when("48h", now), Ok(now - 48 * 3600));
        assert_eq!(parse_when("7d", now), Ok(now - 7 * 86_400));
        assert_eq!(parse_when("1761955200", now), Ok(1_761_955_200));
        assert!(
            parse_when("yesterday", now)
                .unwrap_err()
                .contains("2026-11-01")
        );
        assert!(parse_when("5y", now).is_err());
    }
}
