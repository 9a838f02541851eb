//! Named special keys and the bytes a terminal sends for them.

/// The `send_specials` names and their bytes. `Ctrl-d` is the terminal's end-of-input
/// character (VEOF), not an interrupt.
pub fn bytes(name: &str) -> Option<&'static [u8]> {
    Some(match name {
        "Enter" => b"\r",
        "Key-up" => b"\x1b[A",
        "Key-down" => b"\x1b[B",
        "Key-right" => b"\x1b[C",
        "Key-left" => b"\x1b[D",
        "Ctrl-c" => b"\x03",
        "Ctrl-d" => b"\x04",
        "Ctrl-z" => b"\x1a",
        _ => return None,
    })
}

pub const NAMES: [&str; 8] = [
    "Enter",
    "Key-up",
    "Key-down",
    "Key-left",
    "Key-right",
    "Ctrl-c",
    "Ctrl-d",
    "Ctrl-z",
];

#[cfg(test)]
mod tests {
    #[test]
    fn every_name_has_bytes() {
        for n in super::NAMES {
            assert!(super::bytes(n).is_some(), "{n}");
        }
        assert_eq!(super::bytes("Ctrl-d"), Some(&b"\x04"[..]));
        assert_eq!(super::bytes("ctrl-d"), None);
    }
}
