//! `WINX_LOG_FORMAT=json`: stderr diagnostics as one JSON object per line (`ts_ms`,
//! `level`, `thread`, `target`, `message`), for log shippers. Same records, same levels as
//! the text format; only the shape changes.

use std::io::Write;

pub struct JsonLogger {
    pub level: log::LevelFilter,
}

impl log::Log for JsonLogger {
    fn enabled(&self, meta: &log::Metadata) -> bool {
        meta.level() <= self.level
    }

    fn log(&self, record: &log::Record) {
        if !self.enabled(record.metadata()) {
            return;
        }
        let line = serde_json::json!({
            "ts_ms": crate::deadline::unix_ms(),
            "level": record.level().as_str(),
            "thread": std::thread::current().name().unwrap_or("unnamed"),
            "target": record.target(),
            "message": record.args().to_string(),
        });
        let mut text = line.to_string();
        text.push('\n');
        // One write per record, so lines of two threads never interleave.
        let _ = std::io::stderr().lock().write_all(text.as_bytes());
    }

    fn flush(&self) {}
}

#[cfg(test)]
mod tests {
    use super::*;
    use log::Log;

    #[test]
    fn disabled_levels_are_skipped() {
        let l = JsonLogger {
            level: log::LevelFilter::Warn,
        };
        let warn = log::Metadata::builder().level(log::Level::Warn).build();
        let info = log::Metadata::builder().level(log::Level::Info).build();
        assert!(l.enabled(&warn) && !l.enabled(&info));
    }
}
