//! Lower-case hexadecimal: the one encoder of winx's ids, digests and tags. Two digits per
//! byte into one pre-sized `String` (a `format!` per byte allocated eight or more small
//! strings per id, on paths that run on every call).

const DIGITS: &[u8; 16] = b"0123456789abcdef";

/// `bytes` as lower-case hexadecimal.
pub fn lower(bytes: &[u8]) -> String {
    let mut out = String::with_capacity(bytes.len() * 2);
    push_lower(&mut out, bytes);
    out
}

/// Append `bytes` to `out` as lower-case hexadecimal.
pub fn push_lower(out: &mut String, bytes: &[u8]) {
    for b in bytes {
        out.push(DIGITS[usize::from(b >> 4)] as char);
        out.push(DIGITS[usize::from(b & 0x0f)] as char);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_byte_is_two_lower_case_digits() {
        let all: Vec<u8> = (0..=255).collect();
        let expected: String = all.iter().map(|b| format!("{b:02x}")).collect();
        assert_eq!(lower(&all), expected);
        assert_eq!(lower(&[]), "");
        let mut s = String::from("th_");
        push_lower(&mut s, &[0x0a, 0xf0]);
        assert_eq!(s, "th_0af0");
    }
}
