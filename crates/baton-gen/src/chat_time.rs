//! `strftime_now(format)` for chat templates: the current date and time
//! (UTC) in C's `strftime` notation, as llama.cpp's template engine and
//! Hugging Face's give templates (Llama 3's writes "Today Date: 26 Jul
//! 2024", gpt-oss's the current date). The specifiers templates use:
//! `%Y %y %m %d %e %j %H %I %M %S %p %B %b %h %A %a %F %T %D %Z %z %%`;
//! any other is written as it stands.

use std::time::{SystemTime, UNIX_EPOCH};

const MONTHS: [&str; 12] = [
    "January",
    "February",
    "March",
    "April",
    "May",
    "June",
    "July",
    "August",
    "September",
    "October",
    "November",
    "December",
];
const DAYS: [&str; 7] = ["Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday"];

/// A UTC moment's calendar fields.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Moment {
    year: i64,
    /// 1 to 12.
    month: u32,
    /// 1 to 31.
    day: u32,
    /// 0 (Monday) to 6.
    weekday: u32,
    /// 1 to 366.
    yearday: u32,
    hour: u32,
    minute: u32,
    second: u32,
}

impl Moment {
    /// The moment `seconds` after the Unix epoch (days to civil dates by
    /// Howard Hinnant's algorithm).
    fn at(seconds: i64) -> Moment {
        let (days, rest) = (seconds.div_euclid(86_400), seconds.rem_euclid(86_400));
        let z = days + 719_468;
        let era = z.div_euclid(146_097);
        let doe = z - era * 146_097;
        let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
        let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
        let mp = (5 * doy + 2) / 153;
        let day = (doy - (153 * mp + 2) / 5 + 1) as u32;
        let month = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
        let year = yoe + era * 400 + i64::from(month <= 2);
        let leap = (year % 4 == 0 && year % 100 != 0) || year % 400 == 0;
        let before = [0, 31, 59, 90, 120, 151, 181, 212, 243, 273, 304, 334][month as usize - 1];
        let yearday = before + day + u32::from(leap && month > 2);
        // 1970-01-01 was a Thursday (3 counting from Monday).
        let weekday = (days + 3).rem_euclid(7) as u32;
        let (hour, minute, second) = ((rest / 3600) as u32, (rest % 3600 / 60) as u32, (rest % 60) as u32);
        Moment { year, month, day, weekday, yearday, hour, minute, second }
    }

    fn format(&self, format: &str) -> String {
        let mut out = String::with_capacity(format.len() + 16);
        let mut chars = format.chars();
        while let Some(c) = chars.next() {
            if c != '%' {
                out.push(c);
                continue;
            }
            let month = MONTHS[self.month as usize - 1];
            let weekday = DAYS[self.weekday as usize];
            let hour12 = if self.hour.is_multiple_of(12) { 12 } else { self.hour % 12 };
            match chars.next() {
                Some('Y') => out.push_str(&self.year.to_string()),
                Some('y') => out.push_str(&format!("{:02}", self.year.rem_euclid(100))),
                Some('m') => out.push_str(&format!("{:02}", self.month)),
                Some('d') => out.push_str(&format!("{:02}", self.day)),
                Some('e') => out.push_str(&format!("{:2}", self.day)),
                Some('j') => out.push_str(&format!("{:03}", self.yearday)),
                Some('H') => out.push_str(&format!("{:02}", self.hour)),
                Some('I') => out.push_str(&format!("{hour12:02}")),
                Some('M') => out.push_str(&format!("{:02}", self.minute)),
                Some('S') => out.push_str(&format!("{:02}", self.second)),
                Some('p') => out.push_str(if self.hour < 12 { "AM" } else { "PM" }),
                Some('B') => out.push_str(month),
                Some('b' | 'h') => out.push_str(&month[..3]),
                Some('A') => out.push_str(weekday),
                Some('a') => out.push_str(&weekday[..3]),
                Some('F') => out.push_str(&self.format("%Y-%m-%d")),
                Some('T') => out.push_str(&self.format("%H:%M:%S")),
                Some('D') => out.push_str(&self.format("%m/%d/%y")),
                Some('Z') => out.push_str("UTC"),
                Some('z') => out.push_str("+0000"),
                Some('%') => out.push('%'),
                Some(other) => {
                    out.push('%');
                    out.push(other);
                }
                None => out.push('%'),
            }
        }
        out
    }
}

/// The current UTC date and time written as `format` says (module docs).
pub(crate) fn strftime_now(format: &str) -> String {
    let seconds = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs() as i64);
    Moment::at(seconds).format(format)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn moments_are_the_calendars_and_formats_are_strftimes() {
        // 2024-07-26 13:25:09 UTC, a Friday, the year's 208th day.
        let m = Moment::at(1_722_000_309);
        assert_eq!(
            m,
            Moment { year: 2024, month: 7, day: 26, weekday: 4, yearday: 208, hour: 13, minute: 25, second: 9 }
        );
        assert_eq!(m.format("%d %b %Y"), "26 Jul 2024");
        assert_eq!(m.format("%A, %B %e %Y %I:%M:%S %p %Z"), "Friday, July 26 2024 01:25:09 PM UTC");
        assert_eq!(m.format("%F %T %j %y %D %% %Q"), "2024-07-26 13:25:09 208 24 07/26/24 % %Q");
        // Leap days, the epoch, a year's end, before the epoch.
        assert_eq!(Moment::at(951_782_400).format("%F %a %j"), "2000-02-29 Tue 060");
        assert_eq!(Moment::at(0).format("%F %T %A"), "1970-01-01 00:00:00 Thursday");
        assert_eq!(Moment::at(1_798_761_599).format("%F %T %j"), "2026-12-31 23:59:59 365");
        assert_eq!(Moment::at(-1).format("%F %T %A"), "1969-12-31 23:59:59 Wednesday");
        assert_eq!(strftime_now("%Y").len(), 4);
    }
}
